# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# ocaml_build NAME...: build the OCaml binding's examples NAME (in
# plugins/ocaml/examples) as plugin .so files in $tmpdir, with Debian's
# ocamlfind ocamlopt (-output-obj, PIC runtime), against this tree's
# headers.  Sourced after functions.sh.
ocaml_build ()
{
  local n src="$abs_top_srcdir/plugins/ocaml"
  [ -x /usr/bin/ocamlfind ] && [ -x /usr/bin/ocamlopt ] ||
    { echo "$0: SKIP: Debian's ocamlfind/ocamlopt are not installed"; exit 77; }
  mkdir -p "$tmpdir/ocaml"
  cp "$src/NBDKit.ml" "$src/NBDKit.mli" "$src/nbdkit-ocaml.c" "$tmpdir/ocaml/"
  ( cd "$tmpdir/ocaml" &&
    /usr/bin/ocamlfind ocamlopt -c NBDKit.mli &&
    /usr/bin/ocamlfind ocamlopt -c NBDKit.ml &&
    /usr/bin/ocamlfind ocamlc -c nbdkit-ocaml.c \
      -ccopt "-fPIC -Wall -Werror -I$abs_top_srcdir/include -I$abs_top_builddir/include" ) \
    > "$tmpdir/ocaml/build.log" 2>&1 ||
    { cat "$tmpdir/ocaml/build.log"; fail "building the NBDKit module failed"; }
  for n in "$@"; do
    cp "$src/examples/$n.ml" "$tmpdir/ocaml/"
    ( cd "$tmpdir/ocaml" &&
      /usr/bin/ocamlfind ocamlopt -output-obj -runtime-variant _pic \
        -o "$tmpdir/$n.so" NBDKit.cmx "$n.ml" nbdkit-ocaml.o ) \
      > "$tmpdir/ocaml/build-$n.log" 2>&1 ||
      { cat "$tmpdir/ocaml/build-$n.log"; fail "building the $n example failed"; }
  done
}

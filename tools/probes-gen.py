#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# probes-gen.py: the one place that turns the probe declarations into
# what the tracers read.  The declarations are server/probes.d (the
# server's probes) and one probes.d beside each plugin's, filter's or
# shared library's code (plugins/NAME/probes.d, filters/NAME/probes.d,
# common/NAME/probes.d), all in the syntax of `dtrace -h'.
#
#   probes-gen.py [OPTIONS] stp TEMPLATE OUT     the SystemTap tapset
#   probes-gen.py [OPTIONS] dlib TEMPLATE OUT    the D translators library
#   probes-gen.py [OPTIONS] perf TEMPLATE OUT    nbdkit-perf-events
#   probes-gen.py [OPTIONS] pod TEMPLATE OUT     nbdkit-probes(1)
#   probes-gen.py [OPTIONS] check-so BUILDDIR    every built .so's notes
#       (provider nbdkit) against its declarations, both ways
#   probes-gen.py [OPTIONS] check-sig FILE    the probes against the
#       contract in FILE (tools/probes.stability): every probe has a
#       stability there, and each Stable one the argument types FILE
#       records for it
#   probes-gen.py [OPTIONS] sig FILE OUT    FILE rewritten from today's
#       declarations, keeping each probe's stability (a new probe is
#       Evolving): how a change to the contract is made on purpose
#
# Options: --top DIR (the source tree, default: this script's parent);
# for stp, where the probed files are: --binary PATH, --plugindir DIR,
# --filterdir DIR (installed layout), or --build-tree DIR (the server
# and the .libs of each module in a build tree).
#
# A template is a hand-written file with the prose; each @NBDKIT_...@
# marker in it is replaced (see the functions below).  Per probe, the
# comment before its declaration holds, after its prose, lines that
# start with `@':
#   @arg NAME TEXT      the argument's row in nbdkit-probes(1)
#   @d VIEW F0 F1 ...   D: the view nbdkit_VIEW_t and the member each
#                       argument goes to (`-' for none)
#   @d+ MEMBER = EXPR   D: a member computed from the arguments
#   @stap FLAG...       the tapset's alias: `optional' (marked `?'),
#                       `defined' (every argument read under @defined)
#   @stap+ NAME = EXPR  the flat alias: a variable computed from the
#                       arguments (request_start's command name)
#   @stap.alias A.B [?][: STMT; ...]   a hierarchical alias nbdkit.A.B
#                       on the flat one, with more variables
# A line that starts with more blank space goes on the one before.
# A server probe has at most six arguments (MAX_SERVER_ARGS): bpftrace
# 0.17 reads no further than arg5 on x86_64.
# A module's probes take their D view from the arguments, one member
# per argument; a shared library's probes.d names the modules that
# link it with `@so nbdkit-NAME-plugin ...' in its first comment.
# A module's probe has at most six arguments (bpftrace 0.17 reads no
# further than arg5); every command above fails on one with more.

import argparse
import glob
import os
import re
import subprocess
import sys
import textwrap

PROG = "probes-gen.py"


class Error(Exception):
  pass


class Probe:
  def __init__(self, name, args, doc, tags, module):
    self.name = name
    self.args = args          # [(ctype, name)]
    self.doc = doc            # prose lines
    self.tags = tags          # [(tag, text)]
    self.module = module

  def tag (self, t):
    return [v for k, v in self.tags if k == t]

  def is_str (self, i):
    return "char" in self.args[i][0]

  def is_signed (self, i):
    return not self.is_str (i) and not self.args[i][0].startswith ("u")


class Module:
  def __init__(self, path, kind, name):
    self.path = path
    self.kind = kind          # server, plugin, filter, common
    self.name = name
    self.sos = []             # for common: "nbdkit-NAME-plugin"
    self.probes = []

  def files (self):
    """The .so basenames (or "" for the server) its probes live in."""
    if self.kind == "server":
      return [""]
    if self.kind == "common":
      return self.sos
    return ["nbdkit-%s-%s" % (self.name, self.kind)]


def parse_comment (text):
  """Prose lines and @tags of one comment body."""
  lines = []
  for l in text.splitlines ():
    l = re.sub (r"^\s*/?\*+ ?", "", l)
    l = re.sub (r"\s*\*+/\s*$", "", l)
    lines.append (l)
  doc, tags = [], []
  for l in lines:
    s = l.strip ()
    if s.startswith ("@"):
      m = re.match (r"@([\w.+]+)\s*(.*)$", s)
      tags.append ([m.group (1), m.group (2)])
    elif tags and l.startswith ("  ") and s:
      tags[-1][1] += " " + s
    elif not tags:
      doc.append (s)
  while doc and not doc[-1]:
    doc.pop ()
  while doc and not doc[0]:
    doc.pop (0)
  return doc, [tuple (t) for t in tags]


# Words SystemTap's language reserves: a probe argument so named would
# make the generated tapset (tools/nbdkit.stp) fail to parse.
STAP_RESERVED = {
  "break", "continue", "delete", "else", "for", "foreach", "function",
  "global", "private", "if", "in", "limit", "long", "next", "probe",
  "return", "string", "try", "catch", "while", "%{", "%}",
}

def parse (path, kind, name):
  mod = Module (path, kind, name)
  text = open (path).read ()
  first = re.search (r"/\*(.*?)\*/", text[text.find ("*/") + 2:], re.S)
  if first:
    for l in first.group (1).splitlines ():
      m = re.search (r"@so\s+(.*)$", l)
      if m:
        mod.sos += m.group (1).split ()
  if kind == "common" and not mod.sos:
    raise Error ("%s: no `@so' line names the modules that link it" % path)
  for m in re.finditer (r"(?:/\*((?:(?!\*/).)*)\*/\s*)?\bprobe\s+(\w+)\s*"
                        r"\(([^)]*)\)\s*;", text, re.S):
    comment, pname, args = m.groups ()
    params = []
    for a in args.split (","):
      a = " ".join (a.split ())
      if not a:
        continue
      am = re.match (r"^(.*?)\s*(\w+)$", a)
      if not am or not am.group (1):
        raise Error ("%s: probe %s: cannot read argument `%s'"
                     % (path, pname, a))
      if am.group (2) in STAP_RESERVED:
        raise Error ("%s: probe %s: argument `%s' is a SystemTap keyword "
                     "(the tapset could not name it): rename it"
                     % (path, pname, am.group (2)))
      params.append ((am.group (1).replace (" *", "*").replace ("*", " *"),
                      am.group (2)))
    doc, tags = parse_comment (comment or "")
    if not doc:
      raise Error ("%s: probe %s has no comment saying what it is"
                   % (path, pname))
    mod.probes.append (Probe (pname, params, doc, tags, mod))
  if not mod.probes:
    raise Error ("%s: no probes" % path)
  return mod


# bpftrace 0.17 (Debian 12) reads only arg0..arg5 of a USDT probe on
# x86_64 and refuses a script that names arg6: a server probe with a
# seventh argument would hide it from bpftrace users.
MAX_SERVER_ARGS = 6
MAX_MODULE_ARGS = MAX_SERVER_ARGS

def modules (top):
  mods = [parse (os.path.join (top, "server", "probes.d"), "server", "")]
  for p in mods[0].probes:
    if len (p.args) > MAX_SERVER_ARGS:
      raise Error ("%s: probe %s has %d arguments; bpftrace 0.17 reads "
                   "only %d (arg0..arg%d): drop or move the least needed"
                   % (mods[0].path, p.name, len (p.args), MAX_SERVER_ARGS,
                      MAX_SERVER_ARGS - 1))
  for kind, d in (("common", "common"), ("plugin", "plugins"),
                  ("filter", "filters")):
    for p in sorted (glob.glob (os.path.join (top, d, "*", "probes.d")),
                     key=lambda p: os.path.basename (
                       os.path.dirname (p)).lower ()):
      mods.append (parse (p, kind, os.path.basename (os.path.dirname (p))))
  seen = {}
  for m in mods:
    for p in m.probes:
      # bpftrace 0.17 (Debian 12's) reads only arg0..arg5 of a USDT
      # probe: a module's seventh argument would be out of its reach.
      if m.kind != "server" and len (p.args) > MAX_MODULE_ARGS:
        raise Error ("%s: probe %s has %d arguments: a module's probe has "
                     "at most %d (bpftrace 0.17 reads arg0..arg5); drop, "
                     "merge or split" % (m.path, p.name, len (p.args),
                                         MAX_MODULE_ARGS))
      if p.name in seen and (seen[p.name].args != p.args):
        raise Error ("%s: probe %s is also in %s, with other arguments"
                     % (m.path, p.name, seen[p.name].module.path))
      if p.name in seen:
        raise Error ("%s: probe %s is declared twice" % (m.path, p.name))
      seen[p.name] = p
  return mods


def fill (template, markers, text=None):
  if text is None:
    text = open (template).read ()
  for k, v in markers.items ():
    if "@%s@" % k not in text:
      raise Error ("%s: no marker @%s@" % (template, k))
    text = text.replace ("@%s@" % k, v.rstrip ("\n"))
  left = re.findall (r"@NBDKIT_PROBE_\w+@", text)
  if left:
    raise Error ("%s: unknown markers %s" % (template, " ".join (left)))
  return text


def comment (lines, indent=""):
  w = []
  for l in lines:
    w += textwrap.wrap (l, 72 - len (indent), break_on_hyphens=False) or [""]
  if len (w) == 1:
    return "%s/* %s */\n" % (indent, w[0])
  return ("%s/* %s\n" % (indent, w[0]) +
          "".join ("%s * %s\n" % (indent, x) for x in w[1:-1]) +
          "%s * %s */\n" % (indent, w[-1]))


def origin (mod):
  return ("the server" if mod.kind == "server" else
          "the %s %s" % (mod.name, mod.kind) if mod.kind != "common" else
          "the shared %s (%s)" % (mod.name, ", ".join (mod.sos)))


# ---- SystemTap ---------------------------------------------------------

def stp_paths (opts, file):
  """The path of the file a module's probes live in."""
  if file == "":
    if opts.build_tree:
      return os.path.join (opts.build_tree, "server", "nbdkit")
    return opts.binary
  kind = file.rsplit ("-", 1)[1]
  name = file[len ("nbdkit-"):-len (kind) - 1]
  if opts.build_tree:
    return os.path.join (opts.build_tree, kind + "s", name, ".libs",
                         file + ".so")
  return os.path.join (opts.plugindir if kind == "plugin"
                       else opts.filterdir, file + ".so")


def stp_flat (p, paths):
  flags = " ".join (p.tag ("stap")).split ()
  defined = "defined" in flags
  opt = "optional" in flags or p.module.kind != "server"
  places = ", ".join ('process("%s").mark("%s")%s' %
                      (path, p.name, " ?" if opt else "") for path in paths)
  out = comment (p.doc)
  out += "probe nbdkit.%s = %s\n{\n" % (p.name, places)
  out += '  probe_name = "%s"\n' % p.name
  fmts = []
  for i, (t, n) in enumerate (p.args):
    a = "$arg%d" % (i + 1)
    if p.is_str (i):
      v = 'user_string(%s, "<bad>")' % a
      if defined:
        v = '@defined(%s) ? %s : "<unreadable>"' % (a, v)
      fmts.append ('%s=\\"%%s\\"' % n)
    else:
      v = "@defined(%s) ? %s : -1" % (a, a) if defined else a
      fmts.append ("%s=%%%s" % (n, "d" if p.is_signed (i) else "u"))
    out += "  %s = %s\n" % (n, v)
  for e in p.tag ("stap+"):
    out += "  %s\n" % e.strip ()
  if p.args:
    out += '  argstr = sprintf("%s",\n                   %s)\n' % (
      " ".join (fmts), ", ".join (n for _, n in p.args))
  else:
    out += '  argstr = ""\n'
  return out + "}\n"


def stp_hier (p):
  out = ""
  opt = "optional" in " ".join (p.tag ("stap")).split ()
  for v in p.tag ("stap.alias"):
    m = re.match (r"([\w.]+)\s*(\?)?\s*(?::\s*(.*))?$", v)
    if not m:
      raise Error ("probe %s: cannot read @stap.alias %s" % (p.name, v))
    h, q, body = m.groups ()
    if opt and not q:
      raise Error ("probe %s is optional: nbdkit.%s needs `?'" % (p.name, h))
    stmts = [s.strip () for s in (body or "").split (";") if s.strip ()]
    out += "probe nbdkit.%s = nbdkit.%s%s" % (h, p.name, " ?" if q else "")
    out += ("\n{\n%s}\n" % "".join ("  %s\n" % s for s in stmts)
            if stmts else " { }\n")
  return out


def gen_stp (mods, opts, template):
  flat, hier, mflat = [], [], []
  for m in mods:
    paths = [stp_paths (opts, f) for f in m.files ()]
    if None in paths:
      raise Error ("stp: say where the files are (--binary, --plugindir, "
                   "--filterdir or --build-tree)")
    for p in m.probes:
      (flat if m.kind == "server" else mflat).append (stp_flat (p, paths))
      hier.append (stp_hier (p))
      if m.kind != "server":
        # nbdkit.MODULE.EVENT: curl_size is nbdkit.curl.size.
        mod = m.name.replace ("-", "_")
        event = p.name
        if event.startswith (mod + "_"):
          event = event[len (mod) + 1:]
        hier.append ("probe nbdkit.%s.%s = nbdkit.%s ? { }\n"
                     % (mod, event, p.name))
  text = fill (template, {
    "NBDKIT_PROBE_ALIASES": "\n".join (flat),
    "NBDKIT_PROBE_MODULE_ALIASES": "\n".join (mflat),
    "NBDKIT_PROBE_HIERARCHICAL_ALIASES": "".join (hier),
  })
  where = {"NBDKIT_BINARY": stp_paths (opts, ""),
           "NBDKIT_PLUGINDIR": (os.path.join (opts.build_tree, "plugins")
                                if opts.build_tree else opts.plugindir),
           "NBDKIT_FILTERDIR": (os.path.join (opts.build_tree, "filters")
                                if opts.build_tree else opts.filterdir)}
  for k, v in where.items ():
    text = text.replace ("@%s@" % k, v)
  return text


# ---- D -----------------------------------------------------------------

def d_type (t):
  return "string" if "char" in t else t


def d_arg (p, i):
  return ("copyinstr(arg%d)" % i if p.is_str (i) else
          "(%s)arg%d" % (p.args[i][0], i) if p.is_signed (i) else
          "arg%d" % i)


def d_translator (p, view, members):
  out = "typedef uintptr_t nbdkit_%s_t;\n" % p.name
  out += '#pragma D binding "1.0" translator\n'
  out += "translator %s < nbdkit_%s_t *a > {\n" % (view, p.name)
  out += members
  out += "};\n"
  out += "inline %s *nbdkit_%s =\n    xlate <%s *> ((nbdkit_%s_t *)NULL);\n" \
    % (view, p.name, view, p.name)
  return out


def gen_dlib (mods, template):
  server, module = [], []
  for m in mods:
    for p in m.probes:
      d = p.tag ("d")
      if m.kind == "server":
        if len (d) != 1:
          raise Error ("%s: probe %s needs one `@d VIEW MEMBER...'"
                       % (m.path, p.name))
        f = d[0].split ()
        view, fields = "nbdkit_%s_t" % f[0], f[1:]
        if len (fields) != len (p.args):
          raise Error ("%s: probe %s: @d names %d members for %d arguments"
                       % (m.path, p.name, len (fields), len (p.args)))
        body = ""
        for i, f in enumerate (fields):
          if f != "-":
            body += "\t%s = %s;\n" % (f, d_arg (p, i))
        for e in p.tag ("d+"):
          body += "\t%s;\n" % e.rstrip (";")
        server.append (d_translator (p, view, body))
      else:
        # One view per probe, its members named as the arguments.
        view = "nbdkit_%s_args_t" % p.name
        out = comment (p.doc + ["(%s)" % origin (m)])
        out += "typedef struct nbdkit_%s_args {\n" % p.name
        out += "".join ("\t%s %s;\n" % (d_type (t), n) for t, n in p.args)
        if not p.args:
          out += "\tint none;\n"
        out += "} %s;\n\n" % view
        body = "".join ("\t%s = %s;\n" % (n, d_arg (p, i))
                        for i, (_, n) in enumerate (p.args))
        if not p.args:
          body = "\tnone = 0;\n"
        module.append (out + d_translator (p, view, body))
  return fill (template, {
    "NBDKIT_PROBE_TRANSLATORS": "\n".join (server),
    "NBDKIT_PROBE_MODULE_TRANSLATORS": "\n".join (module),
  })


# ---- perf-events -------------------------------------------------------

def perf_kind (t):
  if "char" in t:
    return "string"
  m = re.match (r"(u?)int(8|16|32|64)_t$", t.replace (" ", ""))
  if m:
    return ("u" if m.group (1) else "s") + m.group (2)
  return "u64"


def gen_perf (mods, template):
  rows = []
  for m in mods:
    rows.append ("    # %s" % m.path.split ("/")[-2] if m.kind != "server"
                 else "    # server")
    for p in m.probes:
      rows.append ("    %r: [%s]," % (p.name, ", ".join (
        "(%r, %r)" % (n, perf_kind (t)) for t, n in p.args)))
  return fill (template, {"NBDKIT_PROBE_TABLE": "\n".join (rows)})


# ---- the manual --------------------------------------------------------

def pod_args (p):
  """The argument table of one server probe."""
  descs = {}
  for v in p.tag ("arg"):
    n, _, text = v.partition (" ")
    descs[n] = text.strip ()
  names = [n for _, n in p.args]
  if set (descs) != set (names):
    raise Error ("probe %s: @arg lines for %s, arguments %s" %
                 (p.name, sorted (descs), names))
  tw = max (len (t) for t, _ in p.args) + 2
  nw = max (len (n) for n in names) + 3
  out = []
  for i, (t, n) in enumerate (p.args):
    head = " arg%d  %s%s" % (i, t.ljust (tw), n.ljust (nw))
    w = textwrap.wrap (descs[n], max (30, 72 - len (head)),
                       break_on_hyphens=False)
    out.append (head + w[0])
    out += [" " * len (head) + x for x in w[1:]]
  return "\n".join (out)


def pod_modules (mods, kinds, contract):
  out = []
  for m in mods:
    if m.kind not in kinds:
      continue
    # Section names are link targets: the example filter's must not be
    # the example plugin's.
    title = m.name
    if m.kind == "filter" and any (o.kind == "plugin" and o.name == m.name
                                   for o in mods):
      title += " filter"
    out.append ("=head2 %s\n\n=over 4\n" % title)
    for p in m.probes:
      doc = " ".join (p.doc)
      dm = re.match (r"(.*?)\s*Arguments:\s*(.*?)\.?$", doc, re.S)
      if dm:
        doc, labels = dm.group (1), dm.group (2)
      else:
        labels = ", ".join (n for _, n in p.args)
      if not p.args:
        labels = "no arguments"
      elif len ([x for x in labels.split (",") if x.strip ()]) != \
           len (p.args):
        raise Error ("%s: probe %s: `Arguments:' names %s for %d arguments"
                     % (m.path, p.name, labels, len (p.args)))
      out.append ("=item B<%s> (%s)\n" % (p.name, labels))
      out.append ("\n".join (textwrap.wrap (doc, 72,
                                            break_on_hyphens=False)) + "\n")
      out.append ("Declared as: C<probe %s (%s)>.  Stability: %s.\n" % (
        p.name, ", ".join ("%s%s" % (t if t.endswith ("*") else t + " ", n)
                           for t, n in p.args), stability (p, contract)))
    out.append ("=back\n")
  return "\n".join (out)


def gen_pod (mods, template, contract):
  text = open (template).read ()
  server = [p for p in mods[0].probes]
  heads = re.findall (r"^=head2 (\w+)\n(?:(?!^=head).)*?^@NBDKIT_PROBE_ARGS@$",
                      text, re.S | re.M)
  names = [p.name for p in server]
  if heads != names:
    raise Error ("%s: the sections with @NBDKIT_PROBE_ARGS@ (%s) are not "
                 "server/probes.d's probes in its order (%s)" %
                 (template, " ".join (heads), " ".join (names)))
  for p in server:
    table = pod_args (p) if p.args else "No arguments."
    table += "\n\nStability: %s" % stability (p, contract)
    text = re.sub (r"(^=head2 %s\n(?:(?!^=head).)*?^)@NBDKIT_PROBE_ARGS@$"
                   % p.name, lambda m: m.group (1) + table, text, count=1,
                   flags=re.S | re.M)
  return fill (template, {
    "NBDKIT_PROBE_PLUGINS": pod_modules (mods, ("common", "plugin"),
                                         contract),
    "NBDKIT_PROBE_FILTERS": pod_modules (mods, ("filter",), contract),
  }, text)


# ---- the stability contract -------------------------------------------

STABILITIES = ("Stable", "Evolving", "Unstable")


def read_contract (path):
  """{probe: (stability, [types] or None)} from tools/probes.stability.

  One probe a line: `STABILITY NAME' or, for a Stable probe, `Stable
  NAME (TYPE, TYPE, ...)' with the C types of its arguments in order.
  """
  out = {}
  for n, l in enumerate (open (path), 1):
    l = l.split ("#", 1)[0].strip ()
    if not l:
      continue
    m = re.match (r"^(\w+)\s+(\w+)\s*(?:\((.*)\))?$", l)
    if not m or m.group (1) not in STABILITIES:
      raise Error ("%s:%d: cannot read `%s'" % (path, n, l))
    st, name, types = m.groups ()
    if name in out:
      raise Error ("%s:%d: %s is listed twice" % (path, n, name))
    if st == "Stable" and types is None:
      raise Error ("%s:%d: Stable %s needs its argument types" %
                   (path, n, name))
    if types is not None:
      types = [" ".join (t.split ()) for t in types.split (",") if t.strip ()]
    out[name] = (st, types)
  return out


def sig_types (p):
  return [t for t, _ in p.args]


def check_contract (mods, path):
  contract = read_contract (path)
  errs = []
  declared = {p.name: p for m in mods for p in m.probes}
  for name, p in declared.items ():
    if name not in contract:
      errs.append ("%s (%s) has no stability in %s" %
                   (name, p.module.path, path))
      continue
    st, types = contract[name]
    if st == "Stable" and types != sig_types (p):
      errs.append ("Stable probe %s changed its arguments: %s declares "
                   "(%s), the contract says (%s)" %
                   (name, p.module.path, ", ".join (sig_types (p)),
                    ", ".join (types)))
  for name, (st, _) in contract.items ():
    if name not in declared:
      errs.append ("%s probe %s is in %s but declared nowhere%s" %
                   (st, name, path, " (a Stable probe may not go)"
                    if st == "Stable" else ""))
  return len (declared), errs


def stability (p, contract):
  return contract.get (p.name, ("Evolving", None))[0]


def gen_sig (mods, path):
  contract = read_contract (path)
  head = []
  for l in open (path):
    if l.startswith ("#") or not l.strip ():
      head.append (l)
    else:
      break
  out = "".join (head)
  for m in mods:
    out += "\n# %s\n" % ("server" if m.kind == "server" else "%s/%s" % (
      {"plugin": "plugins", "filter": "filters"}.get (m.kind, m.kind),
      m.name))
    for p in m.probes:
      st = stability (p, contract)
      out += "%-9s %s" % (st, p.name)
      if st == "Stable":
        out += " (%s)" % ", ".join (sig_types (p))
      out += "\n"
  return out


# ---- the built .so files against their declarations ---------------------

def notes (path):
  r = subprocess.run (["readelf", "-n", "-W", path], capture_output=True,
                      text=True)
  if r.returncode != 0:
    raise Error ("readelf -n %s: %s" % (path, r.stderr.strip ()))
  found, prov, name = {}, None, None
  for l in r.stdout.splitlines ():
    m = re.search (r"Provider:\s*(\S+)", l)
    if m:
      prov = m.group (1)
    m = re.search (r"^\s*Name:\s*(\S+)", l)
    if m:
      name = m.group (1)
    m = re.search (r"^\s*Arguments:\s*(.*)$", l)
    if m is not None and prov == "nbdkit":
      found.setdefault (name, set ()).add (len (m.group (1).split ()))
    elif "Arguments:" not in l and "Name:" in l and prov == "nbdkit":
      # A probe without arguments has no Arguments: line.
      found.setdefault (name, set ())
  for n, counts in found.items ():
    if not counts:
      counts.add (0)
  return found


def check_so (mods, builddir):
  errs, checked = [], 0
  declared = {}
  for m in mods:
    if m.kind == "server":
      continue
    for f in m.files ():
      declared.setdefault (f, []).extend (m.probes)
  sos = set ()
  for kind in ("plugin", "filter"):
    for so in glob.glob (os.path.join (builddir, kind + "s", "*", ".libs",
                                       "nbdkit-*-%s.so" % kind)):
      sos.add ((os.path.basename (so)[:-3], so))
  built = {f for f, _ in sos}
  for f, so in sorted (sos):
    checked += 1
    have = notes (so)
    want = {p.name: p for p in declared.get (f, [])}
    for name, counts in sorted (have.items ()):
      if name not in want:
        errs.append ("%s: probe %s is not declared in a probes.d" % (so, name))
      elif counts != {len (want[name].args)}:
        errs.append ("%s: probe %s has %s arguments, %s declares %d" %
                     (so, name, "/".join (map (str, sorted (counts))), name,
                      len (want[name].args)))
    for name, p in sorted (want.items ()):
      if name not in have:
        errs.append ("%s: %s declares %s, which is not in %s" %
                     (p.module.path, name, name, so))
  for f in sorted (declared):
    if f not in built:
      errs.append ("%s: declared in %s, not built" %
                   (f, declared[f][0].module.path))
  return checked, errs


def main ():
  ap = argparse.ArgumentParser (prog=PROG)
  ap.add_argument ("--top", default=os.path.dirname (os.path.dirname (
    os.path.abspath (__file__))))
  ap.add_argument ("--binary")
  ap.add_argument ("--plugindir")
  ap.add_argument ("--filterdir")
  ap.add_argument ("--build-tree")
  ap.add_argument ("--stability")
  ap.add_argument ("what", choices=["stp", "dlib", "perf", "pod",
                                    "check-so", "check-sig", "sig"])
  ap.add_argument ("files", nargs="+")
  opts = ap.parse_args ()
  try:
    mods = modules (opts.top)
    if opts.what == "check-so":
      checked, errs = check_so (mods, opts.files[0])
      for e in errs:
        print (e)
      print ("%s: %d .so files checked, %d problems" % (PROG, checked,
                                                        len (errs)))
      return 1 if errs or not checked else 0
    if opts.what == "check-sig":
      checked, errs = check_contract (mods, opts.files[0])
      for e in errs:
        print (e)
      print ("%s: %d probes checked against %s, %d problems" %
             (PROG, checked, opts.files[0], len (errs)))
      return 1 if errs or not checked else 0
    if len (opts.files) != 2:
      raise Error ("%s needs TEMPLATE OUT" % opts.what)
    template, out = opts.files
    text = {"stp": lambda: gen_stp (mods, opts, template),
            "dlib": lambda: gen_dlib (mods, template),
            "perf": lambda: gen_perf (mods, template),
            "pod": lambda: gen_pod (mods, template, read_contract (
              opts.stability or os.path.join (opts.top, "tools",
                                              "probes.stability"))),
            "sig": lambda: gen_sig (mods, template)}[opts.what] ()
    with open (out + ".tmp", "w") as f:
      f.write (text)
    if opts.what == "perf":
      os.chmod (out + ".tmp", 0o755)
    os.rename (out + ".tmp", out)
  except Error as e:
    print ("%s: %s" % (PROG, e), file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit (main ())

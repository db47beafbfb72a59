#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# probes-check.py: check the tracing scripts in tools/ against
# server/probes.d, the one list of probes and their argument types.
#
#   probes-check.py PROBES.D stp TAPSET   every probe has an alias of the
#       same name on .mark("NAME"), with one variable per argument named
#       as in probes.d and read from $argN at its position (user_string
#       for strings only), plus probe_name and an argstr naming them all
#   probes-check.py PROBES.D d SCRIPT.d   every nbdkit*:::NAME clause
#       names a real probe, reads only argN that exist, and reads the
#       string arguments with copyinstr() and only those
#   probes-check.py PROBES.D bt SCRIPT.bt...   the same for
#       usdt:...:nbdkit:NAME clauses with str(), and only arg0..arg5
#       (bpftrace 0.17 on x86_64)
#
# Prints one line per problem and exits 1 if there is any.  Used by
# tests/test-tool-stp.sh and tests/test-tool-dtrace.sh; not installed.

import re
import sys


def read_probes (path):
  text = open (path).read ()
  text = re.sub (r"/\*.*?\*/", "", text, flags=re.S)
  probes = {}
  for name, args in re.findall (r"\bprobe\s+(\w+)\s*\(([^)]*)\)\s*;", text):
    params = []
    for a in args.split (","):
      a = " ".join (a.split ())
      if not a:
        continue
      m = re.match (r"^(.*?)\s*\*?\s*(\w+)$", a)
      params.append (("char *" in a or "char*" in a, m.group (2)))
    probes[name] = params
  return probes


def check_stp (probes, path):
  errs = []
  text = open (path).read ()
  aliases = {}
  for m in re.finditer (
      r'^probe\s+nbdkit\.(\w+)\s*=\s*process\("[^"]*"\)\.mark\("(\w+)"\)\s*'
      r'\{(.*?)^\}', text, flags=re.S | re.M):
    alias, mark, body = m.groups ()
    if alias != mark:
      errs.append ("stp: alias nbdkit.%s probes mark(\"%s\")" % (alias, mark))
    if alias in aliases:
      errs.append ("stp: alias nbdkit.%s defined twice" % alias)
    aliases[alias] = body
  for name in sorted (set (aliases) - set (probes)):
    errs.append ("stp: nbdkit.%s is not a probe in probes.d" % name)
  for name, params in sorted (probes.items ()):
    if name not in aliases:
      errs.append ("stp: probe %s has no alias nbdkit.%s" % (name, name))
      continue
    body = aliases[name]
    assigns = dict (re.findall (r"^\s*(\w+)\s*=\s*(.*?)\s*$", body, re.M))
    if assigns.get ("probe_name") != '"%s"' % name:
      errs.append ("stp: nbdkit.%s: probe_name is not \"%s\"" % (name, name))
    for i, (is_str, var) in enumerate (params, 1):
      expr = assigns.get (var)
      if expr is None:
        errs.append ("stp: nbdkit.%s: no variable %s (argument %d)" %
                     (name, var, i))
        continue
      used = set (int (n) for n in re.findall (r"\$arg(\d+)", expr))
      if used != {i}:
        errs.append ("stp: nbdkit.%s: %s reads %s, not $arg%d" %
                     (name, var, sorted (used), i))
      if is_str != ("user_string" in expr):
        errs.append ("stp: nbdkit.%s: %s is %s but read %s user_string" %
                     (name, var, "a string" if is_str else "an integer",
                      "without" if is_str else "with"))
    argstr = assigns.get ("argstr", "")
    if "argstr" not in assigns:
      errs.append ("stp: nbdkit.%s: no argstr" % name)
    argstr_all = body[body.find ("argstr"):]
    for _, var in params:
      if not re.search (r"\b%s\b" % var, argstr_all):
        errs.append ("stp: nbdkit.%s: argstr lacks %s" % (name, var))
  return errs


def clauses (text, head):
  """Yield (probe name, clause text) for each clause whose probe
  description matches head (a regex with one group, the name).  A
  probe description is a line starting in column 0 with a letter;
  "a,\nb\n{...}" gives both a and b the same body."""
  text = re.sub (r"/\*.*?\*/", "", text, flags=re.S)
  parts = re.split (r"(?m)^([A-Za-z][^\n{]*?)[ \t]*$", text)
  # parts: [before, desc, body, desc, body, ...]
  pending = []
  for i in range (1, len (parts), 2):
    desc, body = parts[i].rstrip (","), parts[i + 1]
    m = re.match (r"^%s$" % head, desc.strip ())
    pending.append (m.group (1) if m else None)
    if body.strip () == "":
      continue
    for n in pending:
      if n is not None:
        yield n, body
    pending = []


def check_args (kind, probes, path, head, strfn, max_index):
  errs = []
  text = open (path).read ()
  found = 0
  for name, body in clauses (text, head):
    found += 1
    if name not in probes:
      errs.append ("%s: %s: %s is not a probe in probes.d" %
                   (kind, path, name))
      continue
    params = probes[name]
    as_str = set (int (n) for n in
                  re.findall (r"\b%s\s*\(\s*arg(\d+)\s*\)" % strfn, body))
    every = set (int (n) for n in re.findall (r"\barg(\d+)\b", body))
    for n in sorted (every):
      if n >= len (params):
        errs.append ("%s: %s: %s has %d arguments, arg%d used" %
                     (kind, path, name, len (params), n))
      elif max_index is not None and n > max_index:
        errs.append ("%s: %s: %s: arg%d is beyond what bpftrace reads" %
                     (kind, path, name, n))
    for n in sorted (every):
      if n >= len (params):
        continue
      is_str, var = params[n]
      if is_str and n not in as_str:
        errs.append ("%s: %s: %s: arg%d (%s) is a string, not read with "
                     "%s()" % (kind, path, name, n, var, strfn))
      if not is_str and n in as_str:
        errs.append ("%s: %s: %s: arg%d (%s) is an integer, read with "
                     "%s()" % (kind, path, name, n, var, strfn))
  if found == 0:
    errs.append ("%s: %s: no nbdkit probe clauses found" % (kind, path))
  return errs


def main ():
  if len (sys.argv) < 4 or sys.argv[2] not in ("stp", "d", "bt"):
    sys.exit ("usage: probes-check.py PROBES.D stp|d|bt FILE...")
  probes = read_probes (sys.argv[1])
  if not probes:
    sys.exit ("probes-check.py: no probes in %s" % sys.argv[1])
  errs = []
  for path in sys.argv[3:]:
    if sys.argv[2] == "stp":
      errs += check_stp (probes, path)
    elif sys.argv[2] == "d":
      errs += check_args ("d", probes, path, r"nbdkit\*?:::(\w+)",
                          "copyinstr", None)
    else:
      errs += check_args ("bt", probes, path, r"usdt:[^:\s]+:nbdkit:(\w+)",
                          "str", 5)
  for e in errs:
    print (e)
  print ("probes-check.py: %d probes in %s, %d problems in %s" %
         (len (probes), sys.argv[1], len (errs), " ".join (sys.argv[3:])))
  return 1 if errs else 0


if __name__ == "__main__":
  sys.exit (main ())

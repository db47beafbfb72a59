#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# probes-check.py: check the tracing scripts in tools/ against
# server/probes.d, the one list of probes and their argument types.
#
#   probes-check.py PROBES.D stp TAPSET   every probe has an alias of the
#       same name on .mark("NAME"), with one variable per argument named
#       as in probes.d and read from $argN at its position (user_string
#       for strings only), plus probe_name and an argstr naming them all;
#       and at least one hierarchical alias (nbdkit.STAGE.EVENT = a flat
#       alias); the probes other parts add (EXPECTED) may have aliases
#       before probes.d has them, marked optional with `?'
#   probes-check.py PROBES.D dlib LIBRARY.d   every probe has one
#       translator from nbdkit_NAME_t * that uses every argument, reads
#       only argN that exist, strings with copyinstr() and only those,
#       and an inline nbdkit_NAME of the translated view
#   probes-check.py PROBES.D names FILE...   the tables that name commands,
#       options and reply types in the tools agree with the server's
#       (server/request.c, server/handshake.c, common/protocol.h)
#   probes-check.py PROBES.D d SCRIPT.d   every nbdkit*:::NAME clause
#       names a real probe, reads only argN that exist, and reads the
#       string arguments with copyinstr() and only those
#   probes-check.py PROBES.D bt SCRIPT.bt...   the same for
#       usdt:...:nbdkit:NAME clauses with str(), and only arg0..arg5
#       (bpftrace 0.17 on x86_64)
#
# Prints one line per problem and exits 1 if there is any.  Used by
# tests/test-tool-stp.sh and tests/test-tool-dtrace.sh; not installed.

import glob
import os
import re
import sys

# Probes that other parts of the tracing work (issue 18) add or extend,
# with their arguments as agreed or as those parts wrote them: the
# tapset and the D library may cover them before probes.d has them
# (tapset aliases marked optional with `?', `@defined($argN)' for an
# added argument).  Once probes.d has a probe, probes.d is checked
# against: a signature that changed there shows as a problem.
S, I = True, False
EXPECTED = {
  # part B: late attach
  "connection_info": [(I, "id"), (S, "export"), (S, "peer"),
                      (S, "transport"), (I, "pid"), (I, "uid")],
  # part F: probes from plugins and scripts
  "user": [(I, "id"), (I, "cookie"), (S, "name"), (I, "arg1"), (I, "arg2"),
           (S, "text")],
  # part C: stages
  "reply_written": [(I, "id"), (I, "cookie"), (I, "bytes"), (I, "write_ns"),
                    (I, "ok")],
  "sock_read_start": [(I, "id"), (I, "want")],
  "sock_read_done": [(I, "id"), (I, "got"), (I, "error"), (I, "ns")],
  "sock_write_start": [(I, "id"), (I, "bytes")],
  "sock_write_done": [(I, "id"), (I, "wrote"), (I, "error"), (I, "ns")],
  "worker_start": [(I, "id"), (I, "worker"), (S, "model"),
                   (I, "max_workers")],
  "worker_stop": [(I, "id"), (I, "worker"), (I, "requests")],
  "config": [(S, "layer"), (S, "key"), (S, "value")],
  "plugin_unload": [(S, "name")],
  "filter_unload": [(S, "name")],
  "request_dispatch": [(I, "id"), (I, "cookie"), (I, "queue_ns"),
                       (I, "in_flight")],
  "log": [(S, "level"), (S, "origin"), (S, "message"), (I, "id"),
          (I, "cookie"), (S, "where")],
}


def extended (probes, name):
  """The arguments a tool may read for NAME: probes.d's, or EXPECTED's
  when probes.d's are the first of them (an argument another part adds
  is allowed before the merge)."""
  have = probes[name]
  want = EXPECTED.get (name)
  if want and len (want) > len (have) and want[:len (have)] == have:
    return want
  return have


def read_probes (path):
  """The probes of PATH and, when it is server/probes.d, of every
  plugin's, filter's and shared library's probes.d beside it."""
  probes = read_probes_file (path)
  top = os.path.dirname (os.path.dirname (os.path.abspath (path)))
  if os.path.basename (os.path.dirname (os.path.abspath (path))) == "server":
    for d in ("common", "plugins", "filters"):
      for p in sorted (glob.glob (os.path.join (top, d, "*", "probes.d"))):
        probes.update (read_probes_file (p))
  return probes


def read_probes_file (path):
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
  optional = set ()
  # A module's probe may be in more than one .so: process(A).mark(N) ?,
  # process(B).mark(N) ?
  for m in re.finditer (
      r'^probe\s+nbdkit\.(\w+)\s*=\s*process\("[^"]*"\)\.mark\("(\w+)"\)\s*'
      r'(\?)?\s*(?:,\s*process\("[^"]*"\)\.mark\("\w+"\)\s*\??\s*)*'
      r'\{(.*?)^\}', text, flags=re.S | re.M):
    alias, mark, opt, body = m.groups ()
    if alias != mark:
      errs.append ("stp: alias nbdkit.%s probes mark(\"%s\")" % (alias, mark))
    if alias in aliases:
      errs.append ("stp: alias nbdkit.%s defined twice" % alias)
    aliases[alias] = body
    if opt:
      optional.add (alias)
  probes = dict (probes)
  for name in sorted (set (aliases) - set (probes)):
    if name in EXPECTED and name in optional:
      probes[name] = EXPECTED[name]
    elif name in EXPECTED:
      errs.append ("stp: nbdkit.%s is not in probes.d yet: mark it optional "
                   "(?)" % name)
    else:
      errs.append ("stp: nbdkit.%s is not a probe in probes.d" % name)
  # Hierarchical aliases: nbdkit.STAGE.EVENT = nbdkit.FLAT [?] { ... }
  covered = set ()
  for m in re.finditer (r'^probe\s+nbdkit\.(\w+(?:\.\w+)+)\s*=\s*nbdkit\.(\w+)'
                        r'\s*(\?)?\s*\{', text, flags=re.M):
    h, flat, opt = m.groups ()
    if flat not in aliases:
      errs.append ("stp: nbdkit.%s is defined on nbdkit.%s, not a flat alias"
                   % (h, flat))
    elif flat in optional and not opt:
      errs.append ("stp: nbdkit.%s is on optional nbdkit.%s without `?'"
                   % (h, flat))
    covered.add (flat)
  for name in sorted (probes):
    if name not in covered:
      errs.append ("stp: probe %s has no hierarchical alias (nbdkit.*.*)"
                   % name)
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


def check_dlib (probes, path):
  errs = []
  text = re.sub (r"/\*.*?\*/", "", open (path).read (), flags=re.S)
  seen = {}
  for m in re.finditer (r"^translator\s+(\w+)\s*<\s*nbdkit_(\w+)_t\s*\*\s*\w+\s*>"
                        r"\s*\{(.*?)^\};", text, flags=re.S | re.M):
    out, name, body = m.groups ()
    if name in seen:
      errs.append ("d: %s: two translators for %s" % (path, name))
    seen[name] = (out, body)
  probes = dict (probes)
  for name in sorted (set (seen) - set (probes)):
    if name in EXPECTED:
      probes[name] = EXPECTED[name]
    else:
      errs.append ("d: %s: translator for %s, not a probe in probes.d" %
                   (path, name))
  for name, params in sorted (probes.items ()):
    if name not in seen:
      errs.append ("d: %s: probe %s has no translator from nbdkit_%s_t *" %
                   (path, name, name))
      continue
    out, body = seen[name]
    as_str = set (int (n) for n in
                  re.findall (r"\bcopyinstr\s*\(\s*arg(\d+)\s*\)", body))
    every = set (int (n) for n in re.findall (r"\barg(\d+)\b", body))
    wider = extended (probes, name)
    for n in sorted (every):
      if n >= len (wider):
        errs.append ("d: %s: %s has %d arguments, arg%d used" %
                     (path, name, len (params), n))
        continue
      is_str, var = wider[n]
      if is_str and n not in as_str:
        errs.append ("d: %s: %s: arg%d (%s) is a string, not read with "
                     "copyinstr()" % (path, name, n, var))
      if not is_str and n in as_str:
        errs.append ("d: %s: %s: arg%d (%s) is an integer, read with "
                     "copyinstr()" % (path, name, n, var))
    for n, (_, var) in enumerate (params):
      if n not in every:
        errs.append ("d: %s: %s: the translator leaves out arg%d (%s)" %
                     (path, name, n, var))
    if not re.search (r"^inline\s+%s\s*\*\s*nbdkit_%s\s*=\s*xlate\s*<\s*%s\s*"
                      r"\*\s*>\s*\(\s*\(\s*nbdkit_%s_t\s*\*\s*\)\s*NULL\s*\)\s*;"
                      % (out, name, out, name), text, flags=re.M):
      errs.append ("d: %s: no inline %s *nbdkit_%s = xlate <%s *> (...)" %
                   (path, out, name, out))
  return errs


def server_names (probes_d):
  """The server's names for commands, options and reply types, from
  its C sources: {"cmd": {0: "read", ...}, "opt": {...}, "rep": {...}}."""
  top = os.path.dirname (os.path.dirname (os.path.abspath (probes_d)))
  proto = open (os.path.join (top, "common", "protocol.h")).read ()
  val = {}
  for k, v in re.findall (r"^#define\s+(NBD_\w+)\s+(\d+)\s*$", proto, re.M):
    val[k] = int (v)
  for k, v in re.findall (r"^#define\s+(NBD_REP_ERR_\w+)\s+NBD_REP_ERR\s*\(\s*(\d+)\s*\)",
                          proto, re.M):
    val[k] = 0x80000000 | int (v)
  def cases (path, prefix):
    src = open (os.path.join (top, "server", path)).read ()
    return { val[k]: n for k, n in
             re.findall (r"case\s+(%s\w+):\s*return\s+\"(\w+)\";" % prefix, src) }
  rep = {}
  for k, v in val.items ():
    if k.startswith ("NBD_REP_") and k != "NBD_REP_MAGIC":
      rep[v] = k[len ("NBD_REP_"):].lower ()
  return { "cmd": cases ("request.c", "NBD_CMD_"),
           "opt": cases ("handshake.c", "NBD_OPT_"),
           "rep": rep }


def tool_names (text):
  """The same tables in a tool, whatever its language: stap
  `if (cmd == 0) return "read"', D `c == 0 ? "read" :', bpftrace
  `@nbd_cmd[0] = "read";'.  Which table a line belongs to is told by
  the variable or map name: cmd/c, opt/o, rep/r."""
  found = { "cmd": {}, "opt": {}, "rep": {} }
  keys = { "cmd": "cmd", "c": "cmd", "nbd_cmd": "cmd",
           "opt": "opt", "o": "opt", "nbd_opt": "opt",
           "rep": "rep", "r": "rep", "nbd_rep": "rep" }
  for pat in (r"\bif \((\w+) == (0x[0-9a-fA-F]+|\d+)\) return \"(\w+)\"",
              r"^\s*(\w+) == (0x[0-9a-fA-F]+|\d+) \? \"(\w+)\" :",
              r"@(\w+)\[(0x[0-9a-fA-F]+|\d+)\] = \"(\w+)\";"):
    for var, num, name in re.findall (pat, text, re.M):
      if var in keys:
        found[keys[var]][int (num, 0)] = name
  return found


def check_names (probes_d, path):
  errs = []
  want = server_names (probes_d)
  have = tool_names (open (path).read ())
  if not any (have.values ()):
    return ["names: %s: no table of names found" % path]
  for table, names in sorted (have.items ()):
    if not names:
      continue
    if names != want[table]:
      for k in sorted (set (names) | set (want[table])):
        if names.get (k) != want[table].get (k):
          errs.append ("names: %s: %s %#x is %s here, %s in the server" %
                       (path, table, k, names.get (k), want[table].get (k)))
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
  if len (sys.argv) < 4 or sys.argv[2] not in ("stp", "d", "bt", "dlib",
                                                "names"):
    sys.exit ("usage: probes-check.py PROBES.D stp|d|bt|dlib|names FILE...")
  probes = read_probes (sys.argv[1])
  if not probes:
    sys.exit ("probes-check.py: no probes in %s" % sys.argv[1])
  errs = []
  for path in sys.argv[3:]:
    if sys.argv[2] == "stp":
      errs += check_stp (probes, path)
    elif sys.argv[2] == "dlib":
      errs += check_dlib (probes, path)
    elif sys.argv[2] == "names":
      errs += check_names (sys.argv[1], path)
    elif sys.argv[2] == "d":
      errs += check_args ("d", probes, path, r"nbdkit(?:\*|\$target)?:::(\w+)",
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

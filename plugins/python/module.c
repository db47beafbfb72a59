/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The "nbdkit" module a script imports: the server's helpers and
 * constants, as functions of a built-in module registered before the
 * interpreter starts.  Each function is a thin wrapper over the
 * nbdkit_* function of the same name; they run with the GIL held
 * (they are called from the script), and drop it only around the one
 * that may block on output (debug).
 */
#include <config.h>

/* Python.h first: it sets feature macros the C library reads. */
#include "python.h"
#include "array-size.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#if __has_include (<linux/vm_sockets.h>)
#include <linux/vm_sockets.h>
#define HAVE_VSOCK 1
#endif

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>


__thread int py_set_errno;

static PyObject *
m_debug (PyObject *self, PyObject *args)
{
  const char *msg;
  if (!PyArg_ParseTuple (args, "s:debug", &msg))
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  nbdkit_debug ("%s", msg);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyObject *
m_export_name (PyObject *self, PyObject *args)
{
  const char *s = nbdkit_export_name ();
  if (!s) {
    PyErr_SetString (PyExc_RuntimeError,
                     "nbdkit.export_name: no export name (not in a "
                     "connection?)");
    return NULL;
  }
  /* The client chose these bytes: keep the ones that are not UTF-8. */
  return PyUnicode_DecodeUTF8 (s, strlen (s), "surrogateescape");
}

static PyObject *
m_set_error (PyObject *self, PyObject *args)
{
  int err;
  if (!PyArg_ParseTuple (args, "i:set_error", &err))
    return NULL;
  py_set_errno = err > 0 ? err : 0;
  nbdkit_set_error (err);
  Py_RETURN_NONE;
}

static PyObject *
m_parse_size (PyObject *self, PyObject *args)
{
  const char *s;
  if (!PyArg_ParseTuple (args, "s:parse_size", &s))
    return NULL;
  int64_t r = nbdkit_parse_size (s);
  if (r == -1) {
    PyErr_Format (PyExc_ValueError,
                  "nbdkit.parse_size: cannot parse '%s' as a size", s);
    return NULL;
  }
  return PyLong_FromLongLong (r);
}

static PyObject *
m_shutdown (PyObject *self, PyObject *args)
{
  nbdkit_shutdown ();
  Py_RETURN_NONE;
}

static PyObject *
m_is_tls (PyObject *self, PyObject *args)
{
  int r = nbdkit_is_tls ();
  if (r == -1) {
    PyErr_SetString (PyExc_RuntimeError,
                     "nbdkit.is_tls: not in a connection");
    return NULL;
  }
  return PyBool_FromLong (r);
}

/* The client's address as Python's socket module writes it:
 * (host, port) for IPv4, (host, port, flowinfo, scope_id) for IPv6,
 * (cid, port) for vsock, the path (a str, "" if unnamed) for Unix.
 */
static PyObject *
m_peer_name (PyObject *self, PyObject *args)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char host[INET6_ADDRSTRLEN];

  memset (&ss, 0, sizeof ss);
  if (nbdkit_peer_name ((struct sockaddr *) &ss, &len) == -1) {
    PyErr_SetString (PyExc_RuntimeError,
                     "nbdkit.peer_name: no peer address (not in a "
                     "connection, or stdin/stdout mode?)");
    return NULL;
  }
  switch (ss.ss_family) {
  case AF_INET: {
    struct sockaddr_in *sin = (struct sockaddr_in *) &ss;
    inet_ntop (AF_INET, &sin->sin_addr, host, sizeof host);
    return Py_BuildValue ("(si)", host, ntohs (sin->sin_port));
  }
  case AF_INET6: {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &ss;
    inet_ntop (AF_INET6, &sin6->sin6_addr, host, sizeof host);
    return Py_BuildValue ("(siII)", host, ntohs (sin6->sin6_port),
                          (unsigned) ntohl (sin6->sin6_flowinfo),
                          (unsigned) sin6->sin6_scope_id);
  }
  case AF_UNIX: {
    struct sockaddr_un *sun = (struct sockaddr_un *) &ss;
    size_t off = offsetof (struct sockaddr_un, sun_path);
    size_t n = len > off ? len - off : 0;
    if (n > sizeof sun->sun_path)
      n = sizeof sun->sun_path;
    if (n > 0 && sun->sun_path[0] == '\0') /* abstract: bytes */
      return PyBytes_FromStringAndSize (sun->sun_path, n);
    return PyUnicode_DecodeFSDefaultAndSize (sun->sun_path,
                                             strnlen (sun->sun_path, n));
  }
#ifdef HAVE_VSOCK
  case AF_VSOCK: {
    struct sockaddr_vm *svm = (struct sockaddr_vm *) &ss;
    return Py_BuildValue ("(II)", svm->svm_cid, svm->svm_port);
  }
#endif
  default:
    PyErr_Format (PyExc_RuntimeError,
                  "nbdkit.peer_name: unknown address family %d",
                  (int) ss.ss_family);
    return NULL;
  }
}

static PyObject *
peer_id (int64_t (*fn) (void), const char *name)
{
  int64_t r = fn ();
  if (r == -1) {
    PyErr_Format (PyExc_RuntimeError,
                  "nbdkit.%s: not known (only for a Unix socket client)",
                  name);
    return NULL;
  }
  return PyLong_FromLongLong (r);
}

static PyObject *
m_peer_pid (PyObject *self, PyObject *args)
{
  return peer_id (nbdkit_peer_pid, "peer_pid");
}

static PyObject *
m_peer_uid (PyObject *self, PyObject *args)
{
  return peer_id (nbdkit_peer_uid, "peer_uid");
}

static PyObject *
m_peer_gid (PyObject *self, PyObject *args)
{
  return peer_id (nbdkit_peer_gid, "peer_gid");
}

/* nbdkit 1.34..1.40's calls, weak in <nbdkit-common.h> so that the
 * plugin still loads into a server older than they are (Debian's
 * 1.32): there calling one raises NotImplementedError rather than
 * taking the header's fallback.
 */
static int
newer_call_missing (int present, const char *name)
{
  if (!present)
    PyErr_Format (PyExc_NotImplementedError,
                  "nbdkit.%s: this server has no nbdkit_%s", name, name);
  return !present;
}

static PyObject *
m_disconnect (PyObject *self, PyObject *args, PyObject *kwds)
{
  static char *kwlist[] = { "force", NULL };
  int force = 0;
  if (!PyArg_ParseTupleAndKeywords (args, kwds, "|p:disconnect", kwlist,
                                    &force))
    return NULL;
  if (newer_call_missing (NBDKIT_SERVER_HAS (nbdkit_disconnect),
                          "disconnect"))
    return NULL;
  nbdkit_disconnect (force);
  Py_RETURN_NONE;
}

/* The server has logged why a string did not parse (nbdkit_error); the
 * exception says which string, as parse_size's does.
 */
static PyObject *
m_parse_probability (PyObject *self, PyObject *args)
{
  const char *what, *str;
  double d;
  if (!PyArg_ParseTuple (args, "ss:parse_probability", &what, &str))
    return NULL;
  if (newer_call_missing (NBDKIT_SERVER_HAS (nbdkit_parse_probability),
                          "parse_probability"))
    return NULL;
  if (nbdkit_parse_probability (what, str, &d) == -1) {
    PyErr_Format (PyExc_ValueError,
                  "nbdkit.parse_probability: %s: cannot parse '%s' as a "
                  "probability", what, str);
    return NULL;
  }
  return PyFloat_FromDouble (d);
}

static PyObject *
m_parse_delay (PyObject *self, PyObject *args)
{
  const char *what, *str;
  unsigned sec, nsec;
  if (!PyArg_ParseTuple (args, "ss:parse_delay", &what, &str))
    return NULL;
  if (newer_call_missing (NBDKIT_SERVER_HAS (nbdkit_parse_delay),
                          "parse_delay"))
    return NULL;
  if (nbdkit_parse_delay (what, str, &sec, &nsec) == -1) {
    PyErr_Format (PyExc_ValueError,
                  "nbdkit.parse_delay: %s: cannot parse '%s' as a delay",
                  what, str);
    return NULL;
  }
  return Py_BuildValue ("(II)", sec, nsec);
}

static PyObject *
m_probe (PyObject *self, PyObject *args, PyObject *kwds)
{
  static char *kwlist[] = { "name", "arg1", "arg2", "text", NULL };
  const char *name, *text = NULL;
  long long arg1 = 0, arg2 = 0;
  if (!PyArg_ParseTupleAndKeywords (args, kwds, "s|LLz:probe", kwlist,
                                    &name, &arg1, &arg2, &text))
    return NULL;
  nbdkit_probe (name, arg1, arg2, text);
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
  { "debug", m_debug, METH_VARARGS,
    "debug(msg): a debug message, shown with -v" },
  { "export_name", m_export_name, METH_NOARGS,
    "export_name(): the export name the client asked for (untrusted)" },
  { "set_error", m_set_error, METH_VARARGS,
    "set_error(errno): the error the client gets for the exception "
    "this callback is about to raise" },
  { "parse_size", m_parse_size, METH_VARARGS,
    "parse_size(str): a size such as '1M' in bytes" },
  { "shutdown", m_shutdown, METH_NOARGS,
    "shutdown(): ask the server to exit (asynchronously)" },
  { "is_tls", m_is_tls, METH_NOARGS,
    "is_tls(): whether this connection uses TLS" },
  { "peer_name", m_peer_name, METH_NOARGS,
    "peer_name(): the client's address, as the socket module gives it" },
  { "peer_pid", m_peer_pid, METH_NOARGS,
    "peer_pid(): the client's pid (Unix socket clients)" },
  { "peer_uid", m_peer_uid, METH_NOARGS,
    "peer_uid(): the client's uid (Unix socket clients)" },
  { "peer_gid", m_peer_gid, METH_NOARGS,
    "peer_gid(): the client's gid (Unix socket clients)" },
  { "disconnect", (PyCFunction) (void (*) (void)) m_disconnect,
    METH_VARARGS | METH_KEYWORDS,
    "disconnect(force=False): drop the current client" },
  { "parse_probability", m_parse_probability, METH_VARARGS,
    "parse_probability(what, str): '10%', '1:10', '0.1' as a float" },
  { "parse_delay", m_parse_delay, METH_VARARGS,
    "parse_delay(what, str): '1.5', '20ms', '3us' as (sec, nsec)" },
  { "probe", (PyCFunction) (void (*) (void)) m_probe,
    METH_VARARGS | METH_KEYWORDS,
    "probe(name, arg1=0, arg2=0, text=None): fire the server's USDT "
    "probe 'user'" },
  { NULL, NULL, 0, NULL }
};

static struct PyModuleDef moddef = {
  PyModuleDef_HEAD_INIT,
  .m_name = "nbdkit",
  .m_doc = "The nbdkit server's helpers for a plugin script",
  .m_size = -1,
  .m_methods = methods,
};

PyObject *
py_module_init (void)
{
  static const struct { const char *name; int value; } constants[] = {
#define C(x) { #x, NBDKIT_##x }
    C (THREAD_MODEL_SERIALIZE_CONNECTIONS),
    C (THREAD_MODEL_SERIALIZE_ALL_REQUESTS),
    C (THREAD_MODEL_SERIALIZE_REQUESTS),
    C (THREAD_MODEL_PARALLEL),
    C (FLAG_MAY_TRIM), C (FLAG_FUA), C (FLAG_REQ_ONE), C (FLAG_FAST_ZERO),
    C (FUA_NONE), C (FUA_EMULATE), C (FUA_NATIVE),
    C (CACHE_NONE), C (CACHE_EMULATE), C (CACHE_NATIVE),
    C (EXTENT_HOLE), C (EXTENT_ZERO),
#undef C
  };
  PyObject *m = PyModule_Create (&moddef);
  if (!m)
    return NULL;
  for (size_t i = 0; i < ARRAY_SIZE (constants); i++) {
    if (PyModule_AddIntConstant (m, constants[i].name,
                                 constants[i].value) == -1) {
      Py_DECREF (m);
      return NULL;
    }
  }
  return m;
}

/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The python plugin's per-connection and data callbacks.
 *
 * The handle the server keeps is the object the script's open()
 * returned (a reference owned until close).  Each callback calls the
 * script's function of the same name through call.c and checks what
 * comes back; a missing optional callback answers as nbdkit's Python
 * host does (can_write is "has pwrite", and so on).
 *
 * Data moves without copies where the API allows: with API_VERSION 2
 * pread gets a writable memoryview over the server's reply buffer and
 * pwrite a read-only one over the request's data.  Those views are
 * valid only during the call; one the script keeps is reported and the
 * request failed.  With API_VERSION 1, pread returns a bytes-like
 * object that is copied once.
 */
#include <config.h>

/* Python.h first: it sets feature macros the C library reads. */
#include "python.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "methods.h"

/* Whether the script defines NAME (takes the GIL for the lookup). */
static bool
defined (const char *name)
{
  gil_take ();
  bool r = call_lookup (name) != NULL;
  gil_drop ();
  return r;
}

/* A callback with no script function to call. */
static int
missing (struct call *c, int err)
{
  call_fail (c, err, "the script does not define %s()", c->name);
  return -1;
}

int
py_preconnect (int readonly)
{
  struct call c;
  call_enter (&c, "preconnect");
  PyObject *fn = call_lookup ("preconnect");
  if (fn) {
    PyObject *r = call_script (&c, fn, "(O)", readonly ? Py_True : Py_False);
    Py_XDECREF (r);
  }
  return call_leave (&c, 0);
}

/* A str as UTF-8 (borrowed from the object), or NULL. */
static const char *
utf8 (PyObject *o)
{
  if (!o || !PyUnicode_Check (o))
    return NULL;
  const char *s = PyUnicode_AsUTF8 (o);
  if (!s)
    PyErr_Clear ();
  return s;
}

/* Add one item of list_exports' answer: "name" or (name, description). */
static int
add_export (struct call *c, struct nbdkit_exports *exports, PyObject *item,
            size_t i)
{
  const char *name = utf8 (item), *desc = NULL;
  if (!name && PyTuple_Check (item) && PyTuple_GET_SIZE (item) == 2) {
    name = utf8 (PyTuple_GET_ITEM (item, 0));
    PyObject *d = PyTuple_GET_ITEM (item, 1);
    desc = utf8 (d);
    if (!desc && d != Py_None)
      name = NULL;
  }
  if (!name) {
    call_fail (c, EIO, "item %zu is neither a name (str) nor a "
               "(name, description) tuple of str", i);
    return -1;
  }
  if (nbdkit_add_export (exports, name, desc) == -1) {
    call_fail (c, EIO, "cannot add export %s", name);
    return -1;
  }
  return 0;
}

int
py_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  struct call c;
  call_enter (&c, "list_exports");
  PyObject *fn = call_lookup ("list_exports");
  if (!fn) {
    if (nbdkit_use_default_export (exports) == -1)
      c.err = ENOMEM;
    return call_leave (&c, 0);
  }
  PyObject *r = call_script (&c, fn, "(OO)", readonly ? Py_True : Py_False,
                             is_tls ? Py_True : Py_False);
  if (!r)
    return call_leave (&c, -1);
  PyObject *it = PyObject_GetIter (r);
  if (!it)
    call_fail_exception (&c, "the value returned is not iterable");
  else {
    PyObject *item;
    for (size_t i = 0; (item = PyIter_Next (it)) != NULL; i++) {
      int e = add_export (&c, exports, item, i);
      Py_DECREF (item);
      if (e == -1)
        break;
    }
    if (!c.err && PyErr_Occurred ())
      call_fail_exception (&c, "iterating over the value returned");
    Py_DECREF (it);
  }
  Py_DECREF (r);
  return call_leave (&c, 0);
}

const char *
py_default_export (int readonly, int is_tls)
{
  struct call c;
  const char *ret = "";
  call_enter (&c, "default_export");
  PyObject *fn = call_lookup ("default_export");
  if (fn) {
    PyObject *r = call_script (&c, fn, "(OO)",
                               readonly ? Py_True : Py_False,
                               is_tls ? Py_True : Py_False);
    if (r) {
      const char *s = utf8 (r);
      if (!s)
        call_fail (&c, EIO, "did not return a str");
      else if ((ret = nbdkit_strdup_intern (s)) == NULL)
        c.err = ENOMEM;
      Py_DECREF (r);
    }
  }
  return call_leave (&c, 0) == -1 ? NULL : ret;
}

void *
py_open (int readonly)
{
  struct call c;
  call_enter (&c, "open");
  PyObject *fn = call_lookup ("open");
  PyObject *h = NULL;
  if (!fn)
    missing (&c, EIO);
  else
    h = call_script (&c, fn, "(O)", readonly ? Py_True : Py_False);
  if (call_leave (&c, 0) == -1) {
    if (h) {
      gil_take ();
      Py_DECREF (h);
      gil_drop ();
    }
    return NULL;
  }
  return h;
}

void
py_close (void *handle)
{
  PyObject *h = handle;
  struct call c;
  call_enter (&c, "close");
  PyObject *fn = call_lookup ("close");
  if (fn) {
    PyObject *r = call_script (&c, fn, "(O)", h);
    Py_XDECREF (r);
  }
  Py_DECREF (h);
  call_leave (&c, 0);
}

const char *
py_export_description (void *handle)
{
  struct call c;
  const char *ret = NULL;
  call_enter (&c, "export_description");
  PyObject *fn = call_lookup ("export_description");
  if (fn) {
    PyObject *r = call_script (&c, fn, "(O)", (PyObject *) handle);
    if (r && r != Py_None) {
      const char *s = utf8 (r);
      if (!s)
        call_fail (&c, EIO, "did not return a str");
      else if ((ret = nbdkit_strdup_intern (s)) == NULL)
        c.err = ENOMEM;
    }
    Py_XDECREF (r);
  }
  return call_leave (&c, 0) == -1 ? NULL : ret;
}

/* An integer answer in [MIN, MAX], or -1 after call_fail. */
static int64_t
int_result (struct call *c, PyObject *r, int64_t min, int64_t max,
            const char *what)
{
  if (!PyIndex_Check (r)) {
    call_fail (c, EIO, "returned %s, not an integer (%s)",
               Py_TYPE (r)->tp_name, what);
    return -1;
  }
  PyObject *i = PyNumber_Index (r);
  long long v = i ? PyLong_AsLongLong (i) : -1;
  Py_XDECREF (i);
  if (PyErr_Occurred () || v < min || v > max) {
    PyErr_Clear ();
    call_fail (c, EIO, "returned a value out of range (%s)", what);
    return -1;
  }
  return v;
}

int64_t
py_get_size (void *handle)
{
  struct call c;
  int64_t size = -1;
  call_enter (&c, "get_size");
  PyObject *fn = call_lookup ("get_size");
  if (!fn)
    missing (&c, EIO);
  else {
    PyObject *r = call_script (&c, fn, "(O)", (PyObject *) handle);
    if (r) {
      size = int_result (&c, r, 0, INT64_MAX, "a size in bytes");
      Py_DECREF (r);
    }
  }
  return call_leave (&c, size);
}

int
py_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
               uint32_t *maximum)
{
  struct call c;
  *minimum = *preferred = *maximum = 0;
  call_enter (&c, "block_size");
  PyObject *fn = call_lookup ("block_size");
  if (!fn)
    return call_leave (&c, 0);
  PyObject *r = call_script (&c, fn, "(O)", (PyObject *) handle);
  if (!r)
    return call_leave (&c, -1);
  if (!PyTuple_Check (r) || PyTuple_GET_SIZE (r) != 3)
    call_fail (&c, EIO, "did not return a tuple (minimum, preferred, "
               "maximum)");
  else {
    int64_t v[3];
    for (int i = 0; i < 3 && !c.err; i++)
      v[i] = int_result (&c, PyTuple_GET_ITEM (r, i), 0, UINT32_MAX,
                         "a block size");
    if (!c.err) {
      *minimum = v[0];
      *preferred = v[1];
      *maximum = v[2];
    }
  }
  Py_DECREF (r);
  return call_leave (&c, 0);
}

/* A can_* or is_* callback answering true or false; DFLT when the
 * script does not define it.
 */
static int
bool_callback (void *handle, const char *name, int dflt)
{
  struct call c;
  int ret = dflt;
  call_enter (&c, name);
  PyObject *fn = call_lookup (name);
  if (fn) {
    PyObject *r = call_script (&c, fn, "(O)", (PyObject *) handle);
    if (r) {
      ret = PyObject_IsTrue (r);
      if (ret == -1)
        call_fail_exception (&c, "the value returned has no truth value");
      Py_DECREF (r);
    }
  }
  return call_leave (&c, ret);
}

int
py_is_rotational (void *handle)
{
  return bool_callback (handle, "is_rotational", 0);
}

int
py_can_multi_conn (void *handle)
{
  return bool_callback (handle, "can_multi_conn", 0);
}

int
py_can_write (void *handle)
{
  return bool_callback (handle, "can_write", defined ("pwrite"));
}

int
py_can_flush (void *handle)
{
  return bool_callback (handle, "can_flush", defined ("flush"));
}

int
py_can_trim (void *handle)
{
  return bool_callback (handle, "can_trim", defined ("trim"));
}

int
py_can_zero (void *handle)
{
  return bool_callback (handle, "can_zero", defined ("zero"));
}

int
py_can_extents (void *handle)
{
  return bool_callback (handle, "can_extents", defined ("extents"));
}

int
py_can_fast_zero (void *handle)
{
  if (defined ("can_fast_zero"))
    return bool_callback (handle, "can_fast_zero", 0);
  /* Without a zero of the script's own, the server writes zeroes with
   * pwrite, and a fast zero fails at once: that is fast.
   */
  if (!defined ("zero"))
    return 1;
  int r = py_can_zero (handle);
  return r == -1 ? -1 : !r;
}

/* can_fua and can_cache: one of three constants. */
static int
tristate_callback (void *handle, const char *name, int dflt)
{
  struct call c;
  int ret = dflt;
  call_enter (&c, name);
  PyObject *fn = call_lookup (name);
  if (fn) {
    PyObject *r = call_script (&c, fn, "(O)", (PyObject *) handle);
    if (r) {
      ret = int_result (&c, r, 0, 2, name[4] == 'f' ? "nbdkit.FUA_*"
                        : "nbdkit.CACHE_*");
      Py_DECREF (r);
    }
  }
  return call_leave (&c, ret);
}

int
py_can_fua (void *handle)
{
  int r = tristate_callback (handle, "can_fua",
                             defined ("flush") ? NBDKIT_FUA_EMULATE
                             : NBDKIT_FUA_NONE);
  /* An API_VERSION 1 pwrite has no flags to carry FUA: the server
   * must flush after it instead.
   */
  if (py_api_version == 1 && r == NBDKIT_FUA_NATIVE)
    r = NBDKIT_FUA_EMULATE;
  return r;
}

int
py_can_cache (void *handle)
{
  return tristate_callback (handle, "can_cache",
                            defined ("cache") ? NBDKIT_CACHE_NATIVE
                            : NBDKIT_CACHE_NONE);
}

/* After a call that got a memoryview over a server buffer: the view
 * must not outlive the call.  A reference still held (the view kept,
 * or a slice of it) is released where it can be and fails the call.
 */
static void
end_view (struct call *c, PyObject *mv)
{
  PyMemoryViewObject *m = (PyMemoryViewObject *) mv;
  bool kept = Py_REFCNT (mv) > 1 ||
    (m->mbuf && Py_REFCNT ((PyObject *) m->mbuf) > 1);
  if (kept) {
    /* Releasing the view does not reach slices of it, which share its
     * managed buffer: marking that buffer released (as Python does
     * when it releases one) makes every view of it raise ValueError
     * on access.  The struct is CPython's, exposed for its macros.
     */
    if (m->mbuf && !(m->mbuf->flags & _Py_MANAGED_BUFFER_RELEASED)) {
      m->mbuf->flags |= _Py_MANAGED_BUFFER_RELEASED;
      PyObject_GC_UnTrack (m->mbuf);
    }
    PyObject *r = PyObject_CallMethod (mv, "release", NULL);
    Py_XDECREF (r);
    PyErr_Clear ();
    if (!c->err)
      call_fail (c, EIO, "the script kept a reference to the buffer "
                 "after returning (it is valid only during the call)");
  }
  Py_DECREF (mv);
}

int
py_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
          uint32_t flags)
{
  PyObject *h = handle;
  struct call c;
  call_enter (&c, "pread");
  PyObject *fn = call_lookup ("pread");
  if (!fn) {
    missing (&c, EIO);
    return call_leave (&c, -1);
  }

  if (py_api_version == 1) {
    PyObject *r = call_script (&c, fn, "(OIK)", h, count,
                               (unsigned long long) offset);
    if (!r)
      return call_leave (&c, -1);
    Py_buffer view;
    if (PyObject_GetBuffer (r, &view, PyBUF_CONTIG_RO) == -1)
      call_fail (&c, EIO, "returned %s, which is not a bytes-like object",
                 Py_TYPE (r)->tp_name);
    else {
      if (view.len != count)
        call_fail (&c, EIO, "returned %zd bytes instead of %" PRIu32,
                   view.len, count);
      else
        memcpy (buf, view.buf, count);
      PyBuffer_Release (&view);
    }
    PyErr_Clear ();
    Py_DECREF (r);
    return call_leave (&c, 0);
  }

  PyObject *mv = PyMemoryView_FromMemory (buf, count, PyBUF_WRITE);
  if (!mv) {
    call_fail_exception (&c, "cannot make the buffer");
    return call_leave (&c, -1);
  }
  PyObject *r = call_script (&c, fn, "(OOKI)", h, mv,
                             (unsigned long long) offset, flags);
  Py_XDECREF (r);
  end_view (&c, mv);
  return call_leave (&c, 0);
}

int
py_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  PyObject *h = handle;
  struct call c;
  call_enter (&c, "pwrite");
  PyObject *fn = call_lookup ("pwrite");
  if (!fn) {
    missing (&c, EROFS);
    return call_leave (&c, -1);
  }
  PyObject *mv = PyMemoryView_FromMemory ((char *) buf, count, PyBUF_READ);
  if (!mv) {
    call_fail_exception (&c, "cannot make the buffer");
    return call_leave (&c, -1);
  }
  PyObject *r;
  if (py_api_version == 1)
    r = call_script (&c, fn, "(OOK)", h, mv, (unsigned long long) offset);
  else
    r = call_script (&c, fn, "(OOKI)", h, mv, (unsigned long long) offset,
                     flags);
  Py_XDECREF (r);
  end_view (&c, mv);
  return call_leave (&c, 0);
}

int
py_flush (void *handle, uint32_t flags)
{
  PyObject *h = handle;
  struct call c;
  call_enter (&c, "flush");
  PyObject *fn = call_lookup ("flush");
  if (!fn)
    missing (&c, EINVAL);
  else {
    PyObject *r = py_api_version == 1 ? call_script (&c, fn, "(O)", h)
      : call_script (&c, fn, "(OI)", h, flags);
    Py_XDECREF (r);
  }
  return call_leave (&c, 0);
}

int
py_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  PyObject *h = handle;
  unsigned long long off = offset;
  struct call c;
  call_enter (&c, "trim");
  PyObject *fn = call_lookup ("trim");
  if (!fn)
    missing (&c, EINVAL);
  else {
    PyObject *r = py_api_version == 1
      ? call_script (&c, fn, "(OIK)", h, count, off)
      : call_script (&c, fn, "(OIKI)", h, count, off, flags);
    Py_XDECREF (r);
  }
  return call_leave (&c, 0);
}

int
py_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  PyObject *h = handle;
  unsigned long long off = offset;
  struct call c;
  call_enter (&c, "zero");
  PyObject *fn = call_lookup ("zero");
  if (!fn) {
    /* The server falls back to writing zeroes with pwrite. */
    nbdkit_debug ("%s: no zero(), falling back to pwrite", py_script);
    c.err = EOPNOTSUPP;
    return call_leave (&c, -1);
  }
  /* EOPNOTSUPP from the script asks for the same fallback (and is the
   * answer to a fast zero it cannot do): not an error to log.
   */
  c.expected_err = EOPNOTSUPP;
  PyObject *r;
  if (py_api_version == 1)
    r = call_script (&c, fn, "(OIKO)", h, count, off,
                     flags & NBDKIT_FLAG_MAY_TRIM ? Py_True : Py_False);
  else
    r = call_script (&c, fn, "(OIKI)", h, count, off, flags);
  Py_XDECREF (r);
  return call_leave (&c, 0);
}

int
py_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct call c;
  call_enter (&c, "cache");
  PyObject *fn = call_lookup ("cache");
  if (fn) {
    /* The same arguments in both API versions, as in nbdkit's host. */
    PyObject *r = call_script (&c, fn, "(OIKI)", (PyObject *) handle, count,
                               (unsigned long long) offset, flags);
    Py_XDECREF (r);
  }
  return call_leave (&c, 0);
}

/* One (offset, length, type) of extents' answer. */
static int
add_extent (struct call *c, struct nbdkit_extents *extents, PyObject *item,
            size_t i)
{
  unsigned long long off, len;
  unsigned int type;
  if (!PyTuple_Check (item) ||
      !PyArg_ParseTuple (item, "KKI", &off, &len, &type)) {
    PyErr_Clear ();
    call_fail (c, EIO, "item %zu is not an (offset, length, type) "
               "tuple of integers", i);
    return -1;
  }
  if (nbdkit_add_extent (extents, off, len, type) == -1) {
    call_fail (c, EIO, "item %zu: cannot add the extent (%llu, %llu, %u)",
               i, off, len, type);
    return -1;
  }
  return 0;
}

int
py_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
            struct nbdkit_extents *extents)
{
  struct call c;
  call_enter (&c, "extents");
  PyObject *fn = call_lookup ("extents");
  if (!fn) {
    missing (&c, EINVAL);
    return call_leave (&c, -1);
  }
  PyObject *r = call_script (&c, fn, "(OIKI)", (PyObject *) handle, count,
                             (unsigned long long) offset, flags);
  if (!r)
    return call_leave (&c, -1);
  PyObject *it = PyObject_GetIter (r);
  if (!it)
    call_fail_exception (&c, "the value returned is not iterable");
  else {
    PyObject *item;
    size_t i;
    for (i = 0; (item = PyIter_Next (it)) != NULL; i++) {
      int e = add_extent (&c, extents, item, i);
      Py_DECREF (item);
      if (e == -1)
        break;
    }
    if (!c.err && PyErr_Occurred ())
      call_fail_exception (&c, "iterating over the value returned");
    else if (!c.err && i == 0)
      call_fail (&c, EIO, "returned no extents");
    Py_DECREF (it);
  }
  Py_DECREF (r);
  return call_leave (&c, 0);
}

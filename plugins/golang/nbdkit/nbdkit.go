// SPDX-License-Identifier: BSD-3-Clause (see LICENSE)

// Package nbdkit writes nbdkit plugins in Go.
//
// A plugin is a main package built with -buildmode=c-shared.  Its init
// function calls Register with the plugin value and a value of its
// connection type:
//
//	func init() { nbdkit.Register(&disk{}, &conn{}) }
//	func main() {}
//
// Plugin.Open makes a Connection per client connection.  Optional
// callbacks are the methods of the optional interfaces below
// (Configurer, PWriter, Extenter, ...): the plugin value's methods
// give the plugin-wide ones and the connection value's methods give
// the per-connection ones, so the server sees exactly the callbacks
// the types have, as it would for a C plugin.
//
// Errors: a callback returns an error; the server logs it once,
// prefixed with the callback's name, and the client gets its errno
// (a syscall.Errno, an *Error, or one wrapped in either; EIO
// otherwise).  A panic in a callback is recovered at the boundary and
// becomes EIO.
package nbdkit

/*
#cgo CFLAGS: -DNBDKIT_API_VERSION=2
#include <stdint.h>
#include <stdlib.h>
#include "plugin.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"
)

// Thread models (nbdkit-plugin(3)).
const (
	ThreadModelSerializeConnections = 0
	ThreadModelSerializeAllRequests = 1
	ThreadModelSerializeRequests    = 2
	ThreadModelParallel             = 3
)

// Flags of data requests.
const (
	FlagMayTrim  = 1 << 0
	FlagFUA      = 1 << 1
	FlagReqOne   = 1 << 2
	FlagFastZero = 1 << 3
)

// Extent types, FUA and cache modes.
const (
	ExtentHole   = 1 << 0
	ExtentZero   = 1 << 1
	FUANone      = 0
	FUAEmulate   = 1
	FUANative    = 2
	CacheNone    = 0
	CacheEmulate = 1
	CacheNative  = 2
)

// Info is the plugin's description.  Name is required.  ThreadModel
// is the most the plugin allows (0 means parallel).
type Info struct {
	Name, Longname, Version, Description string
	ConfigHelp, MagicConfigKey           string
	ThreadModel                          int
}

// Plugin is the plugin-wide value given to Register.
type Plugin interface {
	Info() Info
	Open(readonly bool) (Connection, error)
}

// Connection is what Open returns for each client connection.
type Connection interface {
	GetSize() (uint64, error)
	PRead(buf []byte, offset uint64, flags uint32) error
}

// Optional plugin-wide callbacks.
type (
	Loader          interface{ Load() }
	Unloader        interface{ Unload() }
	Configurer      interface{ Config(key, value string) error }
	ConfigCompleter interface{ ConfigComplete() error }
	DumpPluginer    interface{ DumpPlugin() }
	ThreadModeler   interface{ ThreadModel() int }
	Preconnecter    interface{ Preconnect(readonly bool) error }
	GetReadier      interface{ GetReady() error }
	AfterForker     interface{ AfterFork() error }
	Cleanuper       interface{ Cleanup() }
	ExportLister    interface {
		ListExports(readonly, isTLS bool, e *Exports) error
	}
	DefaultExporter interface {
		DefaultExport(readonly, isTLS bool) (string, error)
	}
)

// Optional per-connection callbacks.
type (
	Closer            interface{ Close() }
	ExportDescriber   interface{ ExportDescription() (string, error) }
	BlockSizer        interface{ BlockSize() (min, pref, max uint32, err error) }
	CanWriter         interface{ CanWrite() (bool, error) }
	CanFlusher        interface{ CanFlush() (bool, error) }
	IsRotationaler    interface{ IsRotational() (bool, error) }
	CanTrimmer        interface{ CanTrim() (bool, error) }
	CanZeroer         interface{ CanZero() (bool, error) }
	CanFastZeroer     interface{ CanFastZero() (bool, error) }
	CanFUAer          interface{ CanFUA() (int, error) }
	CanMultiConner    interface{ CanMultiConn() (bool, error) }
	CanExtentser      interface{ CanExtents() (bool, error) }
	CanCacher         interface{ CanCache() (int, error) }
	PWriter           interface{ PWrite(buf []byte, offset uint64, flags uint32) error }
	Flusher           interface{ Flush(flags uint32) error }
	Trimmer           interface{ Trim(count uint32, offset uint64, flags uint32) error }
	Zeroer            interface{ Zero(count uint32, offset uint64, flags uint32) error }
	Cacher            interface{ Cache(count uint32, offset uint64, flags uint32) error }
	Extenter          interface {
		Extents(count uint32, offset uint64, flags uint32, e *Extents) error
	}
)

// Error is an error with the errno the client gets.
type Error struct {
	Errno syscall.Errno
	Msg   string
}

func (e *Error) Error() string { return e.Msg }

// Errorf makes an *Error with errno and a formatted message.
func Errorf(errno syscall.Errno, format string, a ...interface{}) error {
	return &Error{Errno: errno, Msg: fmt.Sprintf(format, a...)}
}

func errnoOf(err error) syscall.Errno {
	var e *Error
	if errors.As(err, &e) {
		return e.Errno
	}
	var n syscall.Errno
	if errors.As(err, &n) {
		return n
	}
	return syscall.EIO
}

// Extents is the list an Extents callback fills.
type Extents struct{ p unsafe.Pointer }

// Add adds an extent (typ: 0 for data, or ExtentHole|ExtentZero).
func (e *Extents) Add(offset, length uint64, typ uint32) error {
	if C.go_add_extent(e.p, C.uint64_t(offset), C.uint64_t(length), C.uint32_t(typ)) == -1 {
		return Errorf(syscall.EINVAL, "nbdkit_add_extent failed")
	}
	return nil
}

// Exports is the list a ListExports callback fills.
type Exports struct{ p unsafe.Pointer }

// Add adds an export with an optional description ("" for none).
func (e *Exports) Add(name, description string) error {
	n := C.CString(name)
	defer C.free(unsafe.Pointer(n))
	var d *C.char
	if description != "" {
		d = C.CString(description)
		defer C.free(unsafe.Pointer(d))
	}
	if C.go_add_export(e.p, n, d) == -1 {
		return Errorf(syscall.EINVAL, "nbdkit_add_export failed")
	}
	return nil
}

// UseDefault advertises the default export.
func (e *Exports) UseDefault() error {
	if C.go_use_default_export(e.p) == -1 {
		return Errorf(syscall.EINVAL, "nbdkit_use_default_export failed")
	}
	return nil
}

// --- Helpers ---------------------------------------------------------------

// Debug logs a debug message (shown with nbdkit -v).
func Debug(format string, a ...interface{}) {
	s := C.CString(fmt.Sprintf(format, a...))
	defer C.free(unsafe.Pointer(s))
	C.go_debug(s)
}

// LogError logs an error message.
func LogError(format string, a ...interface{}) {
	s := C.CString(fmt.Sprintf(format, a...))
	defer C.free(unsafe.Pointer(s))
	C.go_error(s)
}

// ExportName is the export the client asked for.
func ExportName() string {
	p := C.go_export_name()
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// IsTLS tells whether the connection uses TLS.
func IsTLS() bool { return C.go_is_tls() == 1 }

// ParseSize parses a size with the server's rules ("64M", "1G").
func ParseSize(s string) (uint64, error) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	r := C.go_parse_size(cs)
	if r < 0 {
		return 0, Errorf(syscall.EINVAL, "could not parse size %q", s)
	}
	return uint64(r), nil
}

// Shutdown asks the server to shut down.
func Shutdown() { C.go_shutdown() }

// Disconnect ends the current connection only (nbdkit 1.34): with
// force at once, the request being served getting no reply; otherwise
// requests in flight are answered and later ones refused with
// ESHUTDOWN.
func Disconnect(force bool) {
	f := C.int(0)
	if force {
		f = 1
	}
	C.go_disconnect(f)
}

// parseError is the error of a server parser that failed: -1 the
// server logged why, -2 the server has no such call (nbdkit 1.32).
func parseError(r C.int, fn, what, s string) error {
	if r == -2 {
		return Errorf(syscall.ENOTSUP, "%s: this server has no nbdkit_%s", fn, fn)
	}
	return Errorf(syscall.EINVAL, "%s: could not parse %q", what, s)
}

// ParseProbability parses "0.1", "10%", "1:10" or "1/10" with the
// server's rules (nbdkit 1.36).
func ParseProbability(what, s string) (float64, error) {
	cw, cs := C.CString(what), C.CString(s)
	defer C.free(unsafe.Pointer(cw))
	defer C.free(unsafe.Pointer(cs))
	var d C.double
	if r := C.go_parse_probability(cw, cs, &d); r != 0 {
		return 0, parseError(r, "parse_probability", what, s)
	}
	return float64(d), nil
}

// ParseDelay parses "1.5", "20ms", "3us" or "9ns" with the server's
// rules (nbdkit 1.40) into seconds and nanoseconds.
func ParseDelay(what, s string) (sec, nsec uint32, err error) {
	cw, cs := C.CString(what), C.CString(s)
	defer C.free(unsafe.Pointer(cw))
	defer C.free(unsafe.Pointer(cs))
	var cSec, cNsec C.unsigned
	if r := C.go_parse_delay(cw, cs, &cSec, &cNsec); r != 0 {
		return 0, 0, parseError(r, "parse_delay", what, s)
	}
	return uint32(cSec), uint32(cNsec), nil
}

// Probe fires the server's generic USDT probe "user" (id, cookie,
// name, arg1, arg2, text); in nbdkit 1.32 it does nothing.
func Probe(name string, arg1, arg2 int64, text string) {
	n := C.CString(name)
	t := C.CString(text)
	C.go_probe(n, C.int64_t(arg1), C.int64_t(arg2), t)
	C.free(unsafe.Pointer(n))
	C.free(unsafe.Pointer(t))
}

// ConnectionID and RequestCookie join a plugin's trace lines to the
// server's probes (0 outside a connection or request, and in nbdkit
// 1.32).
func ConnectionID() uint64  { return uint64(C.go_connection_id()) }
func RequestCookie() uint64 { return uint64(C.go_request_cookie()) }

// --- Registration and the boundary -------------------------------------------

var (
	thePlugin Plugin
	connType  Connection
	handles   sync.Map // uintptr -> Connection
	handleMu  sync.Mutex
	nextID    uintptr
)

// Register names the plugin; call it from the main package's init.
// conn is any value of the connection type Open returns: its methods
// decide which per-connection callbacks the server sees.
func Register(p Plugin, conn Connection) {
	thePlugin = p
	connType = conn
}

// fail reports err from callback name: one log line, and the errno.
func fail(name string, err error) {
	LogError("%s: %v", name, err)
	C.go_set_error(C.int(errnoOf(err)))
}

// guard runs f for callback name, turning a panic into EIO; it
// returns false when f failed or panicked (already reported).
func guard(name string, f func() error) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			fail(name, fmt.Errorf("panicked: %v", r))
			ok = false
		}
	}()
	if err := f(); err != nil {
		fail(name, err)
		return false
	}
	return true
}

func status(ok bool) C.int {
	if ok {
		return 0
	}
	return -1
}

func boolStatus(b bool, ok bool) C.int {
	if !ok {
		return -1
	}
	if b {
		return 1
	}
	return 0
}

func conn(h C.uintptr_t) Connection {
	c, _ := handles.Load(uintptr(h))
	return c.(Connection)
}

func cstr(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s) // lives as long as the process
}

//export goPluginSetup
func goPluginSetup() C.int {
	if thePlugin == nil || connType == nil {
		msg := C.CString("Go plugin: nbdkit.Register was not called from the main package's init")
		C.go_error(msg)
		C.free(unsafe.Pointer(msg))
		return -1
	}
	info := thePlugin.Info()
	if info.Name == "" {
		msg := C.CString("Go plugin: Info().Name is empty")
		C.go_error(msg)
		C.free(unsafe.Pointer(msg))
		return -1
	}
	var mask uint64
	set := func(bit C.int, has bool) {
		if has {
			mask |= 1 << uint(bit)
		}
	}
	p, c := interface{}(thePlugin), interface{}(connType)
	_, has := p.(Loader)
	set(C.GO_LOAD, has)
	_, has = p.(Unloader)
	set(C.GO_UNLOAD, has)
	_, has = p.(Configurer)
	set(C.GO_CONFIG, has)
	_, has = p.(ConfigCompleter)
	set(C.GO_CONFIG_COMPLETE, has)
	_, has = p.(DumpPluginer)
	set(C.GO_DUMP_PLUGIN, has)
	_, has = p.(ThreadModeler)
	set(C.GO_THREAD_MODEL, has)
	_, has = p.(Preconnecter)
	set(C.GO_PRECONNECT, has)
	_, has = p.(GetReadier)
	set(C.GO_GET_READY, has)
	_, has = p.(AfterForker)
	set(C.GO_AFTER_FORK, has)
	_, has = p.(Cleanuper)
	set(C.GO_CLEANUP, has)
	_, has = p.(ExportLister)
	set(C.GO_LIST_EXPORTS, has)
	_, has = p.(DefaultExporter)
	set(C.GO_DEFAULT_EXPORT, has)
	_, has = c.(ExportDescriber)
	set(C.GO_EXPORT_DESCRIPTION, has)
	_, has = c.(BlockSizer)
	set(C.GO_BLOCK_SIZE, has)
	_, has = c.(CanWriter)
	set(C.GO_CAN_WRITE, has)
	_, has = c.(CanFlusher)
	set(C.GO_CAN_FLUSH, has)
	_, has = c.(IsRotationaler)
	set(C.GO_IS_ROTATIONAL, has)
	_, has = c.(CanTrimmer)
	set(C.GO_CAN_TRIM, has)
	_, has = c.(CanZeroer)
	set(C.GO_CAN_ZERO, has)
	_, has = c.(CanFastZeroer)
	set(C.GO_CAN_FAST_ZERO, has)
	_, has = c.(CanFUAer)
	set(C.GO_CAN_FUA, has)
	_, has = c.(CanMultiConner)
	set(C.GO_CAN_MULTI_CONN, has)
	_, has = c.(CanExtentser)
	set(C.GO_CAN_EXTENTS, has)
	_, has = c.(CanCacher)
	set(C.GO_CAN_CACHE, has)
	_, has = c.(PWriter)
	set(C.GO_PWRITE, has)
	_, has = c.(Flusher)
	set(C.GO_FLUSH, has)
	_, has = c.(Trimmer)
	set(C.GO_TRIM, has)
	_, has = c.(Zeroer)
	set(C.GO_ZERO, has)
	_, has = c.(Cacher)
	set(C.GO_CACHE, has)
	_, has = c.(Extenter)
	set(C.GO_EXTENTS, has)
	model := info.ThreadModel
	if model == 0 {
		model = ThreadModelParallel
	}
	C.go_setup(C.uint64_t(mask), C.CString(info.Name), cstr(info.Longname),
		cstr(info.Version), cstr(info.Description), cstr(info.ConfigHelp),
		cstr(info.MagicConfigKey), C.int(model))
	return 0
}

//export goLoad
func goLoad() { guard("load", func() error { thePlugin.(Loader).Load(); return nil }) }

//export goUnload
func goUnload() { guard("unload", func() error { thePlugin.(Unloader).Unload(); return nil }) }

//export goConfig
func goConfig(k, v *C.char) C.int {
	key, value := C.GoString(k), C.GoString(v)
	return status(guard("config", func() error { return thePlugin.(Configurer).Config(key, value) }))
}

//export goConfigComplete
func goConfigComplete() C.int {
	return status(guard("config_complete", func() error { return thePlugin.(ConfigCompleter).ConfigComplete() }))
}

//export goDumpPlugin
func goDumpPlugin() {
	guard("dump_plugin", func() error { thePlugin.(DumpPluginer).DumpPlugin(); return nil })
}

//export goThreadModel
func goThreadModel() C.int {
	m := -1
	guard("thread_model", func() error { m = thePlugin.(ThreadModeler).ThreadModel(); return nil })
	return C.int(m)
}

//export goPreconnect
func goPreconnect(ro C.int) C.int {
	return status(guard("preconnect", func() error { return thePlugin.(Preconnecter).Preconnect(ro != 0) }))
}

//export goGetReady
func goGetReady() C.int {
	return status(guard("get_ready", func() error { return thePlugin.(GetReadier).GetReady() }))
}

//export goAfterFork
func goAfterFork() C.int {
	return status(guard("after_fork", func() error { return thePlugin.(AfterForker).AfterFork() }))
}

//export goCleanup
func goCleanup() { guard("cleanup", func() error { thePlugin.(Cleanuper).Cleanup(); return nil }) }

//export goListExports
func goListExports(ro, tls C.int, e unsafe.Pointer) C.int {
	list := &Exports{p: e}
	return status(guard("list_exports", func() error {
		return thePlugin.(ExportLister).ListExports(ro != 0, tls != 0, list)
	}))
}

//export goDefaultExport
func goDefaultExport(ro, tls C.int) *C.char {
	var name string
	if !guard("default_export", func() (err error) {
		name, err = thePlugin.(DefaultExporter).DefaultExport(ro != 0, tls != 0)
		return
	}) {
		return nil
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return (*C.char)(unsafe.Pointer(C.go_intern(cs)))
}

//export goOpen
func goOpen(ro C.int) C.uintptr_t {
	var c Connection
	if !guard("open", func() (err error) {
		c, err = thePlugin.Open(ro != 0)
		if err == nil && c == nil {
			err = Errorf(syscall.EIO, "Open returned no connection")
		}
		return
	}) {
		return 0
	}
	handleMu.Lock()
	nextID++
	id := nextID
	handleMu.Unlock()
	handles.Store(id, c)
	return C.uintptr_t(id)
}

//export goClose
func goClose(h C.uintptr_t) {
	c := conn(h)
	handles.Delete(uintptr(h))
	if cl, ok := c.(Closer); ok {
		guard("close", func() error { cl.Close(); return nil })
	}
}

//export goGetSize
func goGetSize(h C.uintptr_t) C.int64_t {
	var n uint64
	if !guard("get_size", func() (err error) {
		n, err = conn(h).GetSize()
		if err == nil && n > 1<<63-1 {
			err = Errorf(syscall.EFBIG, "size %d does not fit in 63 bits", n)
		}
		return
	}) {
		return -1
	}
	return C.int64_t(n)
}

//export goExportDescription
func goExportDescription(h C.uintptr_t) *C.char {
	var d string
	if !guard("export_description", func() (err error) {
		d, err = conn(h).(ExportDescriber).ExportDescription()
		return
	}) {
		return nil
	}
	cs := C.CString(d)
	defer C.free(unsafe.Pointer(cs))
	return (*C.char)(unsafe.Pointer(C.go_intern(cs)))
}

//export goBlockSize
func goBlockSize(h C.uintptr_t, min, pref, max *C.uint32_t) C.int {
	var a, b, c uint32
	if !guard("block_size", func() (err error) {
		a, b, c, err = conn(h).(BlockSizer).BlockSize()
		return
	}) {
		return -1
	}
	*min, *pref, *max = C.uint32_t(a), C.uint32_t(b), C.uint32_t(c)
	return 0
}

//export goCan
func goCan(h C.uintptr_t, which C.int) C.int {
	c := conn(h)
	var b bool
	var n int
	var name string
	ok := false
	switch which {
	case C.GO_CAN_WRITE:
		name = "can_write"
		ok = guard(name, func() (err error) { b, err = c.(CanWriter).CanWrite(); return })
	case C.GO_CAN_FLUSH:
		name = "can_flush"
		ok = guard(name, func() (err error) { b, err = c.(CanFlusher).CanFlush(); return })
	case C.GO_IS_ROTATIONAL:
		name = "is_rotational"
		ok = guard(name, func() (err error) { b, err = c.(IsRotationaler).IsRotational(); return })
	case C.GO_CAN_TRIM:
		name = "can_trim"
		ok = guard(name, func() (err error) { b, err = c.(CanTrimmer).CanTrim(); return })
	case C.GO_CAN_ZERO:
		name = "can_zero"
		ok = guard(name, func() (err error) { b, err = c.(CanZeroer).CanZero(); return })
	case C.GO_CAN_FAST_ZERO:
		name = "can_fast_zero"
		ok = guard(name, func() (err error) { b, err = c.(CanFastZeroer).CanFastZero(); return })
	case C.GO_CAN_MULTI_CONN:
		name = "can_multi_conn"
		ok = guard(name, func() (err error) { b, err = c.(CanMultiConner).CanMultiConn(); return })
	case C.GO_CAN_EXTENTS:
		name = "can_extents"
		ok = guard(name, func() (err error) { b, err = c.(CanExtentser).CanExtents(); return })
	case C.GO_CAN_FUA:
		ok = guard("can_fua", func() (err error) { n, err = c.(CanFUAer).CanFUA(); return })
		if !ok {
			return -1
		}
		return C.int(n)
	case C.GO_CAN_CACHE:
		ok = guard("can_cache", func() (err error) { n, err = c.(CanCacher).CanCache(); return })
		if !ok {
			return -1
		}
		return C.int(n)
	default:
		return -1
	}
	return boolStatus(b, ok)
}

//export goPread
func goPread(h C.uintptr_t, buf unsafe.Pointer, count C.uint32_t, offset C.uint64_t, flags C.uint32_t) C.int {
	b := unsafe.Slice((*byte)(buf), int(count))
	return status(guard("pread", func() error { return conn(h).PRead(b, uint64(offset), uint32(flags)) }))
}

//export goPwrite
func goPwrite(h C.uintptr_t, buf unsafe.Pointer, count C.uint32_t, offset C.uint64_t, flags C.uint32_t) C.int {
	b := unsafe.Slice((*byte)(buf), int(count))
	return status(guard("pwrite", func() error { return conn(h).(PWriter).PWrite(b, uint64(offset), uint32(flags)) }))
}

//export goFlush
func goFlush(h C.uintptr_t, flags C.uint32_t) C.int {
	return status(guard("flush", func() error { return conn(h).(Flusher).Flush(uint32(flags)) }))
}

//export goRange
func goRange(h C.uintptr_t, which C.int, count C.uint32_t, offset C.uint64_t, flags C.uint32_t) C.int {
	c := conn(h)
	n, off, fl := uint32(count), uint64(offset), uint32(flags)
	switch which {
	case C.GO_TRIM:
		return status(guard("trim", func() error { return c.(Trimmer).Trim(n, off, fl) }))
	case C.GO_ZERO:
		return status(guard("zero", func() error { return c.(Zeroer).Zero(n, off, fl) }))
	case C.GO_CACHE:
		return status(guard("cache", func() error { return c.(Cacher).Cache(n, off, fl) }))
	}
	return -1
}

//export goExtents
func goExtents(h C.uintptr_t, count C.uint32_t, offset C.uint64_t, flags C.uint32_t, e unsafe.Pointer) C.int {
	list := &Extents{p: e}
	return status(guard("extents", func() error {
		return conn(h).(Extenter).Extents(uint32(count), uint64(offset), uint32(flags), list)
	}))
}

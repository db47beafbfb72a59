// SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
//! Write nbdkit plugins in Rust.
//!
//! A plugin is a type implementing [`Server`]: one value per client
//! connection, made by [`Server::open`] and dropped when the connection
//! closes.  [`plugin!`] exports the `plugin_init` symbol the server
//! looks for, filling in the callbacks the type names, so the result is
//! an ordinary plugin `.so` (crate-type `cdylib`) that this server and
//! nbdkit 1.32 load alike:
//!
//! ```ignore
//! struct Disk;
//! impl nbdkit::Server for Disk {
//!     const NAME: &'static str = "disk";
//!     fn open(_readonly: bool) -> nbdkit::Result<Self> { Ok(Disk) }
//!     fn get_size(&self) -> nbdkit::Result<u64> { Ok(1 << 20) }
//!     fn read_at(&self, buf: &mut [u8], _offset: u64) -> nbdkit::Result<()> {
//!         buf.fill(0);
//!         Ok(())
//!     }
//! }
//! nbdkit::plugin!(Disk);
//! ```
//!
//! Only `open`, `get_size` and `read_at` are always wired.  Every other
//! callback is wired when it is named in the macro, for example
//! `nbdkit::plugin!(Disk { write_at, flush, config })`; a callback that
//! is not named is absent, and the server does what it does for a C
//! plugin without it (no `write_at`: the export is read-only).
//!
//! Errors: a callback returns [`Error`], an errno with a message.  The
//! server logs the message, prefixed with the callback's name, and the
//! client gets the errno.  A panic in a callback is caught at the
//! boundary and reported as EIO; it never unwinds into the server.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The C ABI: the plugin structure of API version 2 and the server
/// functions this crate calls.  The server exports them; a plugin
/// `.so` leaves them undefined and the loader binds them.
pub mod ffi {
    use std::os::raw::{c_char, c_int, c_void};

    type H = *mut c_void;

    #[repr(C)]
    pub struct Plugin {
        pub struct_size: u64,
        pub api_version: c_int,
        pub thread_model_static: c_int,
        pub name: *const c_char,
        pub longname: *const c_char,
        pub version: *const c_char,
        pub description: *const c_char,
        pub load: Option<extern "C" fn()>,
        pub unload: Option<extern "C" fn()>,
        pub config: Option<extern "C" fn(*const c_char, *const c_char) -> c_int>,
        pub config_complete: Option<extern "C" fn() -> c_int>,
        pub config_help: *const c_char,
        pub open: Option<extern "C" fn(c_int) -> H>,
        pub close: Option<extern "C" fn(H)>,
        pub get_size: Option<extern "C" fn(H) -> i64>,
        pub can_write: Option<extern "C" fn(H) -> c_int>,
        pub can_flush: Option<extern "C" fn(H) -> c_int>,
        pub is_rotational: Option<extern "C" fn(H) -> c_int>,
        pub can_trim: Option<extern "C" fn(H) -> c_int>,
        pub pread_v1: *const c_void,
        pub pwrite_v1: *const c_void,
        pub flush_v1: *const c_void,
        pub trim_v1: *const c_void,
        pub zero_v1: *const c_void,
        pub errno_is_preserved: c_int,
        pub dump_plugin: Option<extern "C" fn()>,
        pub can_zero: Option<extern "C" fn(H) -> c_int>,
        pub can_fua: Option<extern "C" fn(H) -> c_int>,
        pub pread: Option<extern "C" fn(H, *mut c_void, u32, u64, u32) -> c_int>,
        pub pwrite: Option<extern "C" fn(H, *const c_void, u32, u64, u32) -> c_int>,
        pub flush: Option<extern "C" fn(H, u32) -> c_int>,
        pub trim: Option<extern "C" fn(H, u32, u64, u32) -> c_int>,
        pub zero: Option<extern "C" fn(H, u32, u64, u32) -> c_int>,
        pub magic_config_key: *const c_char,
        pub can_multi_conn: Option<extern "C" fn(H) -> c_int>,
        pub can_extents: Option<extern "C" fn(H) -> c_int>,
        pub extents: Option<extern "C" fn(H, u32, u64, u32, *mut c_void) -> c_int>,
        pub can_cache: Option<extern "C" fn(H) -> c_int>,
        pub cache: Option<extern "C" fn(H, u32, u64, u32) -> c_int>,
        pub thread_model: Option<extern "C" fn() -> c_int>,
        pub can_fast_zero: Option<extern "C" fn(H) -> c_int>,
        pub preconnect: Option<extern "C" fn(c_int) -> c_int>,
        pub get_ready: Option<extern "C" fn() -> c_int>,
        pub after_fork: Option<extern "C" fn() -> c_int>,
        pub list_exports: Option<extern "C" fn(c_int, c_int, *mut c_void) -> c_int>,
        pub default_export: Option<extern "C" fn(c_int, c_int) -> *const c_char>,
        pub export_description: Option<extern "C" fn(H) -> *const c_char>,
        pub cleanup: Option<extern "C" fn()>,
        pub block_size: Option<extern "C" fn(H, *mut u32, *mut u32, *mut u32) -> c_int>,
    }

    extern "C" {
        pub fn nbdkit_error(fs: *const c_char, ...);
        pub fn nbdkit_debug(fs: *const c_char, ...);
        pub fn nbdkit_set_error(err: c_int);
        pub fn nbdkit_export_name() -> *const c_char;
        pub fn nbdkit_is_tls() -> c_int;
        pub fn nbdkit_parse_size(s: *const c_char) -> i64;
        pub fn nbdkit_parse_bool(s: *const c_char) -> c_int;
        pub fn nbdkit_shutdown();
        pub fn nbdkit_strdup_intern(s: *const c_char) -> *const c_char;
        pub fn nbdkit_add_extent(e: *mut c_void, offset: u64, length: u64, kind: u32) -> c_int;
        pub fn nbdkit_add_export(e: *mut c_void, name: *const c_char, desc: *const c_char) -> c_int;
        pub fn nbdkit_use_default_export(e: *mut c_void) -> c_int;
        pub fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
}

/// The functions this server adds to nbdkit 1.32's ABI
/// (nbdkit_connection_id, nbdkit_request_cookie, nbdkit_probe) are
/// looked up at run time, so that the same plugin also loads in a
/// server without them (nbdkit 1.32), where they do nothing.
mod extensions {
    use std::os::raw::{c_char, c_int, c_uint, c_void};
    use std::sync::Once;

    type Id = extern "C" fn() -> u64;
    type Probe = extern "C" fn(*const c_char, i64, i64, *const c_char);
    type Disconnect = extern "C" fn(c_int);
    type ParseProbability = extern "C" fn(*const c_char, *const c_char, *mut f64) -> c_int;
    type ParseDelay = extern "C" fn(*const c_char, *const c_char, *mut c_uint, *mut c_uint) -> c_int;

    static ONCE: Once = Once::new();
    static mut CONNECTION_ID: Option<Id> = None;
    static mut REQUEST_COOKIE: Option<Id> = None;
    static mut PROBE: Option<Probe> = None;
    // nbdkit 1.34..1.40's calls, looked up the same way.
    static mut DISCONNECT: Option<Disconnect> = None;
    static mut PARSE_PROBABILITY: Option<ParseProbability> = None;
    static mut PARSE_DELAY: Option<ParseDelay> = None;

    fn resolve() {
        ONCE.call_once(|| unsafe {
            // RTLD_DEFAULT is the null handle on glibc.
            let f = |n: &[u8]| super::ffi::dlsym(std::ptr::null_mut(), n.as_ptr() as *const c_char);
            // Each slot gets the symbol of that name, if the server has it.
            macro_rules! look_up {
                ($slot:ident, $ty:ty, $name:literal) => {
                    let p = f($name);
                    if !p.is_null() {
                        $slot = Some(std::mem::transmute::<*mut c_void, $ty>(p));
                    }
                };
            }
            look_up!(CONNECTION_ID, Id, b"nbdkit_connection_id\0");
            look_up!(REQUEST_COOKIE, Id, b"nbdkit_request_cookie\0");
            look_up!(PROBE, Probe, b"nbdkit_probe\0");
            look_up!(DISCONNECT, Disconnect, b"nbdkit_disconnect\0");
            look_up!(PARSE_PROBABILITY, ParseProbability, b"nbdkit_parse_probability\0");
            look_up!(PARSE_DELAY, ParseDelay, b"nbdkit_parse_delay\0");
        });
    }
    pub fn connection_id() -> u64 {
        resolve();
        unsafe { CONNECTION_ID.map_or(0, |f| f()) }
    }
    pub fn request_cookie() -> u64 {
        resolve();
        unsafe { REQUEST_COOKIE.map_or(0, |f| f()) }
    }
    pub fn probe(name: *const c_char, a1: i64, a2: i64, text: *const c_char) {
        resolve();
        if let Some(f) = unsafe { PROBE } {
            f(name, a1, a2, text)
        }
    }
    /// false: the server has no nbdkit_disconnect.
    pub fn disconnect(force: bool) -> bool {
        resolve();
        unsafe { DISCONNECT }.map(|f| f(force as c_int)).is_some()
    }
    /// None: the server has no such call; Some(-1): it did not parse.
    pub fn parse_probability(what: *const c_char, s: *const c_char, r: &mut f64) -> Option<c_int> {
        resolve();
        unsafe { PARSE_PROBABILITY }.map(|f| f(what, s, r))
    }
    pub fn parse_delay(what: *const c_char, s: *const c_char, sec: &mut c_uint, nsec: &mut c_uint) -> Option<c_int> {
        resolve();
        unsafe { PARSE_DELAY }.map(|f| f(what, s, sec, nsec))
    }
}

/// errno values a callback commonly returns (Linux numbering, which is
/// what the server maps to NBD errors).
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const EIO: i32 = 5;
    pub const ENOMEM: i32 = 12;
    pub const EACCES: i32 = 13;
    pub const EINVAL: i32 = 22;
    pub const EFBIG: i32 = 27;
    pub const ENOSPC: i32 = 28;
    pub const EROFS: i32 = 30;
    pub const ENOTSUP: i32 = 95;
    pub const ESHUTDOWN: i32 = 108;
}

/// A failed callback: the errno the client gets and the message the
/// server logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    errno: i32,
    msg: String,
}

impl Error {
    pub fn new(errno: i32, msg: impl Into<String>) -> Self {
        Error { errno, msg: msg.into() }
    }
    pub fn errno(&self) -> i32 {
        self.errno
    }
    pub fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (errno {})", self.msg, self.errno)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(e.raw_os_error().unwrap_or(errno::EIO), e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// How the server may call the plugin's callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadModel {
    SerializeConnections = 0,
    SerializeAllRequests = 1,
    SerializeRequests = 2,
    Parallel = 3,
}

/// How FUA (write through) is offered: see nbdkit-plugin(3), can_fua.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuaMode {
    None = 0,
    Emulate = 1,
    Native = 2,
}

/// How a cache request is handled: see nbdkit-plugin(3), can_cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    None = 0,
    Emulate = 1,
    Native = 2,
}

/// The flags of a data request (NBDKIT_FLAG_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u32);

impl Flags {
    pub const MAY_TRIM: u32 = 1 << 0;
    pub const FUA: u32 = 1 << 1;
    pub const REQ_ONE: u32 = 1 << 2;
    pub const FAST_ZERO: u32 = 1 << 3;
    pub fn may_trim(self) -> bool {
        self.0 & Self::MAY_TRIM != 0
    }
    pub fn fua(self) -> bool {
        self.0 & Self::FUA != 0
    }
    pub fn req_one(self) -> bool {
        self.0 & Self::REQ_ONE != 0
    }
    pub fn fast_zero(self) -> bool {
        self.0 & Self::FAST_ZERO != 0
    }
}

/// Extent types for [`Extents::add`].
pub const EXTENT_HOLE: u32 = 1 << 0;
pub const EXTENT_ZERO: u32 = 1 << 1;

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(errno::EIO)
}

/// The list an `extents` callback fills.
pub struct Extents(*mut c_void);

impl Extents {
    /// Add an extent of LENGTH bytes at OFFSET of the given type
    /// (0 for data, or EXTENT_HOLE and/or EXTENT_ZERO).
    pub fn add(&mut self, offset: u64, length: u64, kind: u32) -> Result<()> {
        if unsafe { ffi::nbdkit_add_extent(self.0, offset, length, kind) } == -1 {
            return Err(Error::new(last_errno(), "nbdkit_add_extent failed"));
        }
        Ok(())
    }
}

/// The list a `list_exports` callback fills.
pub struct Exports(*mut c_void);

impl Exports {
    pub fn add(&mut self, name: &str, description: Option<&str>) -> Result<()> {
        let n = cstring(name)?;
        let d = match description {
            Some(d) => Some(cstring(d)?),
            None => None,
        };
        let dp = d.as_ref().map_or(std::ptr::null(), |d| d.as_ptr());
        if unsafe { ffi::nbdkit_add_export(self.0, n.as_ptr(), dp) } == -1 {
            return Err(Error::new(last_errno(), "nbdkit_add_export failed"));
        }
        Ok(())
    }
    /// Advertise the default export (its name comes from default_export).
    pub fn use_default(&mut self) -> Result<()> {
        if unsafe { ffi::nbdkit_use_default_export(self.0) } == -1 {
            return Err(Error::new(last_errno(), "nbdkit_use_default_export failed"));
        }
        Ok(())
    }
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(errno::EINVAL, "string contains a NUL byte"))
}

// --- Helpers a plugin calls ----------------------------------------------

/// Log MSG as a debug message (shown with nbdkit -v).
pub fn debug(msg: &str) {
    if let Ok(c) = CString::new(msg.replace('\0', "\\0")) {
        unsafe { ffi::nbdkit_debug(b"%s\0".as_ptr() as *const c_char, c.as_ptr()) }
    }
}

/// Log MSG as an error message.
pub fn error(msg: &str) {
    if let Ok(c) = CString::new(msg.replace('\0', "\\0")) {
        unsafe { ffi::nbdkit_error(b"%s\0".as_ptr() as *const c_char, c.as_ptr()) }
    }
}

/// The export name the client asked for (None outside a connection).
pub fn export_name() -> Option<String> {
    let p = unsafe { ffi::nbdkit_export_name() };
    if p.is_null() {
        return None;
    }
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Whether the current connection uses TLS.
pub fn is_tls() -> bool {
    let r = unsafe { ffi::nbdkit_is_tls() };
    r == 1
}

/// Parse a size with the server's rules ("1G", "512k", "4096").  On a
/// bad string the server has logged why; the error says which string.
pub fn parse_size(s: &str) -> Result<u64> {
    let c = cstring(s)?;
    let r = unsafe { ffi::nbdkit_parse_size(c.as_ptr()) };
    if r < 0 {
        return Err(Error::new(errno::EINVAL, format!("could not parse size \"{}\"", s)));
    }
    Ok(r as u64)
}

/// Parse a boolean with the server's rules ("true", "off", "1", ...).
pub fn parse_bool(s: &str) -> Result<bool> {
    let c = cstring(s)?;
    match unsafe { ffi::nbdkit_parse_bool(c.as_ptr()) } {
        -1 => Err(Error::new(errno::EINVAL, format!("could not parse boolean \"{}\"", s))),
        r => Ok(r == 1),
    }
}

/// Ask the server to shut down (as on SIGTERM).
pub fn shutdown() {
    unsafe { ffi::nbdkit_shutdown() }
}

/// End the current connection only (nbdkit 1.34): with FORCE at once,
/// the request being served getting no reply; otherwise requests in
/// flight are answered and later ones refused with ESHUTDOWN.  Nothing
/// in a server without it (nbdkit 1.32).
pub fn disconnect(force: bool) {
    extensions::disconnect(force);
}

/// The error of a server parser: not there (nbdkit 1.32), or the
/// string did not parse (the server has logged why, under WHAT).
fn parse_error(r: Option<i32>, call: &str, what: &str, s: &str) -> Error {
    match r {
        None => Error::new(errno::ENOTSUP, format!("this server has no nbdkit_{}", call)),
        Some(_) => Error::new(errno::EINVAL, format!("{}: could not parse \"{}\"", what, s)),
    }
}

/// Parse a probability ("0.1", "10%", "1:10", "1/10") with the
/// server's rules (nbdkit 1.36): finite, not negative, perhaps above 1.
pub fn parse_probability(what: &str, s: &str) -> Result<f64> {
    let (cw, cs) = (cstring(what)?, cstring(s)?);
    let mut d = 0.0;
    match extensions::parse_probability(cw.as_ptr(), cs.as_ptr(), &mut d) {
        Some(0) => Ok(d),
        r => Err(parse_error(r, "parse_probability", what, s)),
    }
}

/// Parse a delay ("1.5", "20ms", "3us", "9ns") with the server's rules
/// (nbdkit 1.40) into (seconds, nanoseconds).
pub fn parse_delay(what: &str, s: &str) -> Result<(u32, u32)> {
    let (cw, cs) = (cstring(what)?, cstring(s)?);
    let (mut sec, mut nsec) = (0, 0);
    match extensions::parse_delay(cw.as_ptr(), cs.as_ptr(), &mut sec, &mut nsec) {
        Some(0) => Ok((sec, nsec)),
        r => Err(parse_error(r, "parse_delay", what, s)),
    }
}

/// The current connection's id (0 outside a connection) and request's
/// cookie (0 outside a request), for joining a plugin's own trace
/// lines to the server's probes.
pub fn connection_id() -> u64 {
    extensions::connection_id()
}
pub fn request_cookie() -> u64 {
    extensions::request_cookie()
}

/// Fire the server's generic USDT probe "user" (id, cookie, NAME, ARG1,
/// ARG2, TEXT).  Cheap when nothing traces it; does nothing in a
/// server without probes (nbdkit 1.32).
pub fn probe(name: &str, arg1: i64, arg2: i64, text: &str) {
    let n = CString::new(name.replace('\0', "")).unwrap_or_default();
    let t = CString::new(text.replace('\0', "")).unwrap_or_default();
    extensions::probe(n.as_ptr(), arg1, arg2, t.as_ptr())
}

// --- The trait a plugin implements ----------------------------------------

fn unsupported<T>(what: &str) -> Result<T> {
    Err(Error::new(errno::ENOTSUP, format!("{} is not supported", what)))
}

/// A plugin: the associated constants and functions without `self`
/// are plugin-wide, the methods are called on the value `open` made
/// for the connection.  Only `open`, `get_size` and `read_at` must be
/// written; the others are wired only when named in [`plugin!`].
pub trait Server: Sized + Send + Sync + 'static {
    const NAME: &'static str;
    const LONGNAME: Option<&'static str> = None;
    const VERSION: Option<&'static str> = None;
    const DESCRIPTION: Option<&'static str> = None;
    const CONFIG_HELP: Option<&'static str> = None;
    const MAGIC_CONFIG_KEY: Option<&'static str> = None;
    const THREAD_MODEL: ThreadModel = ThreadModel::Parallel;

    fn open(readonly: bool) -> Result<Self>;
    fn get_size(&self) -> Result<u64>;
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;

    fn load() {}
    fn unload() {}
    fn config(key: &str, _value: &str) -> Result<()> {
        Err(Error::new(errno::EINVAL, format!("unknown parameter \"{}\"", key)))
    }
    fn config_complete() -> Result<()> {
        Ok(())
    }
    fn dump_plugin() {}
    fn thread_model() -> Result<ThreadModel> {
        Ok(Self::THREAD_MODEL)
    }
    fn preconnect(_readonly: bool) -> Result<()> {
        Ok(())
    }
    fn get_ready() -> Result<()> {
        Ok(())
    }
    fn after_fork() -> Result<()> {
        Ok(())
    }
    fn cleanup() {}
    fn list_exports(_readonly: bool, _is_tls: bool, exports: &mut Exports) -> Result<()> {
        exports.use_default()
    }
    fn default_export(_readonly: bool, _is_tls: bool) -> Result<String> {
        Ok(String::new())
    }

    fn export_description(&self) -> Result<String> {
        unsupported("export_description")
    }
    /// (minimum, preferred, maximum)
    fn block_size(&self) -> Result<(u32, u32, u32)> {
        unsupported("block_size")
    }
    fn can_write(&self) -> Result<bool> {
        Ok(false)
    }
    fn can_flush(&self) -> Result<bool> {
        Ok(false)
    }
    fn is_rotational(&self) -> Result<bool> {
        Ok(false)
    }
    fn can_trim(&self) -> Result<bool> {
        Ok(false)
    }
    fn can_zero(&self) -> Result<bool> {
        Ok(false)
    }
    fn can_fast_zero(&self) -> Result<bool> {
        Ok(false)
    }
    fn can_fua(&self) -> Result<FuaMode> {
        Ok(FuaMode::None)
    }
    fn can_multi_conn(&self) -> Result<bool> {
        Ok(false)
    }
    fn can_extents(&self) -> Result<bool> {
        Ok(false)
    }
    fn can_cache(&self) -> Result<CacheMode> {
        Ok(CacheMode::None)
    }
    fn write_at(&self, _buf: &[u8], _offset: u64, _flags: Flags) -> Result<()> {
        unsupported("write")
    }
    fn flush(&self, _flags: Flags) -> Result<()> {
        unsupported("flush")
    }
    fn trim(&self, _count: u32, _offset: u64, _flags: Flags) -> Result<()> {
        unsupported("trim")
    }
    fn zero(&self, _count: u32, _offset: u64, _flags: Flags) -> Result<()> {
        unsupported("zero")
    }
    fn cache(&self, _count: u32, _offset: u64, _flags: Flags) -> Result<()> {
        unsupported("cache")
    }
    fn extents(&self, _count: u32, _offset: u64, _flags: Flags, _e: &mut Extents) -> Result<()> {
        unsupported("extents")
    }
}

// --- The boundary: C callbacks calling the trait ---------------------------

/// Run F for the callback NAME; on an error or a panic, log it (once,
/// prefixed with NAME), set the errno, and return None.
fn guard<R, F: FnOnce() -> Result<R>>(name: &str, f: F) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(r)) => Some(r),
        Ok(Err(e)) => {
            error(&format!("{}: {}", name, e.msg));
            unsafe { ffi::nbdkit_set_error(e.errno) };
            None
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            error(&format!("{}: panicked: {}", name, what));
            unsafe { ffi::nbdkit_set_error(errno::EIO) };
            None
        }
    }
}

fn status(r: Option<()>) -> c_int {
    if r.is_some() {
        0
    } else {
        -1
    }
}

fn boolean(r: Option<bool>) -> c_int {
    match r {
        Some(true) => 1,
        Some(false) => 0,
        None => -1,
    }
}

unsafe fn this<'a, T>(h: *mut c_void) -> &'a T {
    &*(h as *const T)
}

unsafe fn text<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        ""
    } else {
        CStr::from_ptr(p).to_str().unwrap_or("")
    }
}

fn intern(s: &str) -> *const c_char {
    match CString::new(s) {
        Ok(c) => unsafe { ffi::nbdkit_strdup_intern(c.as_ptr()) },
        Err(_) => {
            error("string contains a NUL byte");
            unsafe { ffi::nbdkit_set_error(errno::EINVAL) };
            std::ptr::null()
        }
    }
}

#[doc(hidden)]
pub mod cb {
    use super::*;

    pub extern "C" fn open<T: Server>(readonly: c_int) -> *mut c_void {
        match guard("open", || T::open(readonly != 0)) {
            Some(t) => Box::into_raw(Box::new(t)) as *mut c_void,
            None => std::ptr::null_mut(),
        }
    }
    pub extern "C" fn close<T: Server>(h: *mut c_void) {
        if !h.is_null() {
            let b = unsafe { Box::from_raw(h as *mut T) };
            let _ = catch_unwind(AssertUnwindSafe(move || drop(b)));
        }
    }
    pub extern "C" fn get_size<T: Server>(h: *mut c_void) -> i64 {
        match guard("get_size", || unsafe { this::<T>(h) }.get_size()) {
            Some(n) if n <= i64::MAX as u64 => n as i64,
            Some(_) => {
                error("get_size: size does not fit in 63 bits");
                unsafe { ffi::nbdkit_set_error(errno::EFBIG) };
                -1
            }
            None => -1,
        }
    }
    pub extern "C" fn pread<T: Server>(h: *mut c_void, buf: *mut c_void, count: u32, offset: u64, _flags: u32) -> c_int {
        let b = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, count as usize) };
        status(guard("pread", || unsafe { this::<T>(h) }.read_at(b, offset)))
    }
    pub extern "C" fn pwrite<T: Server>(h: *mut c_void, buf: *const c_void, count: u32, offset: u64, flags: u32) -> c_int {
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, count as usize) };
        status(guard("pwrite", || unsafe { this::<T>(h) }.write_at(b, offset, Flags(flags))))
    }
    pub extern "C" fn flush<T: Server>(h: *mut c_void, flags: u32) -> c_int {
        status(guard("flush", || unsafe { this::<T>(h) }.flush(Flags(flags))))
    }
    pub extern "C" fn trim<T: Server>(h: *mut c_void, count: u32, offset: u64, flags: u32) -> c_int {
        status(guard("trim", || unsafe { this::<T>(h) }.trim(count, offset, Flags(flags))))
    }
    pub extern "C" fn zero<T: Server>(h: *mut c_void, count: u32, offset: u64, flags: u32) -> c_int {
        status(guard("zero", || unsafe { this::<T>(h) }.zero(count, offset, Flags(flags))))
    }
    pub extern "C" fn cache<T: Server>(h: *mut c_void, count: u32, offset: u64, flags: u32) -> c_int {
        status(guard("cache", || unsafe { this::<T>(h) }.cache(count, offset, Flags(flags))))
    }
    pub extern "C" fn extents<T: Server>(h: *mut c_void, count: u32, offset: u64, flags: u32, e: *mut c_void) -> c_int {
        let mut list = Extents(e);
        status(guard("extents", || unsafe { this::<T>(h) }.extents(count, offset, Flags(flags), &mut list)))
    }
    pub extern "C" fn load<T: Server>() {
        guard("load", || {
            T::load();
            Ok(())
        });
    }
    pub extern "C" fn unload<T: Server>() {
        guard("unload", || {
            T::unload();
            Ok(())
        });
    }
    pub extern "C" fn dump_plugin<T: Server>() {
        guard("dump_plugin", || {
            T::dump_plugin();
            Ok(())
        });
    }
    pub extern "C" fn cleanup<T: Server>() {
        guard("cleanup", || {
            T::cleanup();
            Ok(())
        });
    }
    pub extern "C" fn config<T: Server>(key: *const c_char, value: *const c_char) -> c_int {
        status(guard("config", || unsafe { T::config(text(key), text(value)) }))
    }
    pub extern "C" fn config_complete<T: Server>() -> c_int {
        status(guard("config_complete", T::config_complete))
    }
    pub extern "C" fn thread_model<T: Server>() -> c_int {
        match guard("thread_model", T::thread_model) {
            Some(m) => m as c_int,
            None => -1,
        }
    }
    pub extern "C" fn preconnect<T: Server>(readonly: c_int) -> c_int {
        status(guard("preconnect", || T::preconnect(readonly != 0)))
    }
    pub extern "C" fn get_ready<T: Server>() -> c_int {
        status(guard("get_ready", T::get_ready))
    }
    pub extern "C" fn after_fork<T: Server>() -> c_int {
        status(guard("after_fork", T::after_fork))
    }
    pub extern "C" fn list_exports<T: Server>(readonly: c_int, is_tls: c_int, e: *mut c_void) -> c_int {
        let mut list = Exports(e);
        status(guard("list_exports", || T::list_exports(readonly != 0, is_tls != 0, &mut list)))
    }
    pub extern "C" fn default_export<T: Server>(readonly: c_int, is_tls: c_int) -> *const c_char {
        match guard("default_export", || T::default_export(readonly != 0, is_tls != 0)) {
            Some(s) => intern(&s),
            None => std::ptr::null(),
        }
    }
    pub extern "C" fn export_description<T: Server>(h: *mut c_void) -> *const c_char {
        match guard("export_description", || unsafe { this::<T>(h) }.export_description()) {
            Some(s) => intern(&s),
            None => std::ptr::null(),
        }
    }
    pub extern "C" fn block_size<T: Server>(h: *mut c_void, min: *mut u32, pref: *mut u32, max: *mut u32) -> c_int {
        match guard("block_size", || unsafe { this::<T>(h) }.block_size()) {
            Some((a, b, c)) => {
                unsafe {
                    *min = a;
                    *pref = b;
                    *max = c;
                }
                0
            }
            None => -1,
        }
    }
    pub extern "C" fn can_write<T: Server>(h: *mut c_void) -> c_int {
        boolean(guard("can_write", || unsafe { this::<T>(h) }.can_write()))
    }
    pub extern "C" fn can_flush<T: Server>(h: *mut c_void) -> c_int {
        boolean(guard("can_flush", || unsafe { this::<T>(h) }.can_flush()))
    }
    pub extern "C" fn is_rotational<T: Server>(h: *mut c_void) -> c_int {
        boolean(guard("is_rotational", || unsafe { this::<T>(h) }.is_rotational()))
    }
    pub extern "C" fn can_trim<T: Server>(h: *mut c_void) -> c_int {
        boolean(guard("can_trim", || unsafe { this::<T>(h) }.can_trim()))
    }
    pub extern "C" fn can_zero<T: Server>(h: *mut c_void) -> c_int {
        boolean(guard("can_zero", || unsafe { this::<T>(h) }.can_zero()))
    }
    pub extern "C" fn can_fast_zero<T: Server>(h: *mut c_void) -> c_int {
        boolean(guard("can_fast_zero", || unsafe { this::<T>(h) }.can_fast_zero()))
    }
    pub extern "C" fn can_multi_conn<T: Server>(h: *mut c_void) -> c_int {
        boolean(guard("can_multi_conn", || unsafe { this::<T>(h) }.can_multi_conn()))
    }
    pub extern "C" fn can_extents<T: Server>(h: *mut c_void) -> c_int {
        boolean(guard("can_extents", || unsafe { this::<T>(h) }.can_extents()))
    }
    pub extern "C" fn can_fua<T: Server>(h: *mut c_void) -> c_int {
        match guard("can_fua", || unsafe { this::<T>(h) }.can_fua()) {
            Some(m) => m as c_int,
            None => -1,
        }
    }
    pub extern "C" fn can_cache<T: Server>(h: *mut c_void) -> c_int {
        match guard("can_cache", || unsafe { this::<T>(h) }.can_cache()) {
            Some(m) => m as c_int,
            None => -1,
        }
    }
}

fn leak(s: Option<&str>) -> *const c_char {
    match s {
        Some(s) => CString::new(s).expect("plugin string with a NUL byte").into_raw(),
        None => std::ptr::null(),
    }
}

/// Builds the plugin structure for T; used by [`plugin!`].  Each method
/// named after a callback wires that callback.
#[doc(hidden)]
pub struct Builder<T: Server> {
    p: ffi::Plugin,
    _t: std::marker::PhantomData<T>,
}

macro_rules! wire {
    ($($name:ident => $field:ident),* $(,)?) => {
        impl<T: Server> Builder<T> {
            $(pub fn $name(&mut self) { self.p.$field = Some(cb::$name::<T>); })*
        }
    };
}

wire! {
    load => load, unload => unload, config => config,
    config_complete => config_complete, dump_plugin => dump_plugin,
    thread_model => thread_model, preconnect => preconnect,
    get_ready => get_ready, after_fork => after_fork, cleanup => cleanup,
    list_exports => list_exports, default_export => default_export,
    export_description => export_description, block_size => block_size,
    can_write => can_write, can_flush => can_flush,
    is_rotational => is_rotational, can_trim => can_trim,
    can_zero => can_zero, can_fast_zero => can_fast_zero,
    can_fua => can_fua, can_multi_conn => can_multi_conn,
    can_extents => can_extents, can_cache => can_cache,
    flush => flush, trim => trim, zero => zero, cache => cache,
    extents => extents,
}

/// A panic in a callback is reported by the boundary as one error line
/// ("pread: panicked: MESSAGE"); the hook only adds where it happened,
/// as a debug message, instead of Rust's default print to stderr.
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            if let Some(l) = info.location() {
                debug(&format!("panic at {}:{}", l.file(), l.line()));
            }
        }))
    });
}

impl<T: Server> Builder<T> {
    pub fn new() -> Self {
        quiet_panics();
        let null = std::ptr::null();
        Builder {
            p: ffi::Plugin {
                struct_size: std::mem::size_of::<ffi::Plugin>() as u64,
                api_version: 2,
                thread_model_static: T::THREAD_MODEL as c_int,
                name: leak(Some(T::NAME)),
                longname: leak(T::LONGNAME),
                version: leak(T::VERSION),
                description: leak(T::DESCRIPTION),
                load: None,
                unload: None,
                config: None,
                config_complete: None,
                config_help: leak(T::CONFIG_HELP),
                open: Some(cb::open::<T>),
                close: Some(cb::close::<T>),
                get_size: Some(cb::get_size::<T>),
                can_write: None,
                can_flush: None,
                is_rotational: None,
                can_trim: None,
                pread_v1: null as *const c_void,
                pwrite_v1: null as *const c_void,
                flush_v1: null as *const c_void,
                trim_v1: null as *const c_void,
                zero_v1: null as *const c_void,
                errno_is_preserved: 0,
                dump_plugin: None,
                can_zero: None,
                can_fua: None,
                pread: Some(cb::pread::<T>),
                pwrite: None,
                flush: None,
                trim: None,
                zero: None,
                magic_config_key: leak(T::MAGIC_CONFIG_KEY),
                can_multi_conn: None,
                can_extents: None,
                extents: None,
                can_cache: None,
                cache: None,
                thread_model: None,
                can_fast_zero: None,
                preconnect: None,
                get_ready: None,
                after_fork: None,
                list_exports: None,
                default_export: None,
                export_description: None,
                cleanup: None,
                block_size: None,
            },
            _t: std::marker::PhantomData,
        }
    }
    /// Wire writes (the name matches the trait method write_at).
    pub fn write_at(&mut self) {
        self.p.pwrite = Some(cb::pwrite::<T>);
    }
    /// The finished structure, alive as long as the process.
    pub fn into_raw(self) -> *const ffi::Plugin {
        Box::into_raw(Box::new(self.p))
    }
}

impl<T: Server> Default for Builder<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Export `plugin_init` for the type T, wiring the optional callbacks
/// named in braces: `plugin!(T)` or `plugin!(T { write_at, flush })`.
#[macro_export]
macro_rules! plugin {
    ($t:ty $({ $($cb:ident),* $(,)? })?) => {
        #[no_mangle]
        pub extern "C" fn plugin_init() -> *const $crate::ffi::Plugin {
            static ONCE: ::std::sync::Once = ::std::sync::Once::new();
            static mut PLUGIN: *const $crate::ffi::Plugin = ::std::ptr::null();
            ONCE.call_once(|| {
                #[allow(unused_mut)]
                let mut b = $crate::Builder::<$t>::new();
                $($( b.$cb(); )*)?
                unsafe { PLUGIN = b.into_raw(); }
            });
            unsafe { PLUGIN }
        }
    };
}

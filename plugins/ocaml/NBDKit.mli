(* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) *)

(** Write nbdkit plugins in OCaml.

    A plugin is a module whose top level calls {!register_plugin} with
    a record of callbacks, linked with [ocamlopt -output-obj] into a
    plugin [.so] (see nbdkit-ocaml-plugin(3)).  ['a] is the type of the
    value [open_connection] makes for each client connection. *)

type thread_model =
  | Serialize_connections
  | Serialize_all_requests
  | Serialize_requests
  | Parallel

type fua_flag = FUA_none | FUA_emulate | FUA_native
type cache_flag = Cache_none | Cache_emulate | Cache_native

type extent = {
  offset : int64;
  length : int64;
  is_hole : bool;
  is_zero : bool;
}

(** Request flags: a bit mask of the [flag_*] values. *)
val flag_may_trim : int
val flag_fua : int
val flag_req_one : int
val flag_fast_zero : int

type 'a plugin = {
  name : string;                         (** required *)
  longname : string;                     (** "" for none, as the others *)
  version : string;
  description : string;
  config_help : string;
  magic_config_key : string;
  thread_model : thread_model;
  (** The most the plugin allows.  OCaml's runtime runs one callback
      at a time: anything above [Serialize_all_requests] is lowered to
      it. *)

  load : (unit -> unit) option;
  unload : (unit -> unit) option;
  config : (string -> string -> unit) option;
  config_complete : (unit -> unit) option;
  dump_plugin : (unit -> unit) option;
  get_ready : (unit -> unit) option;
  after_fork : (unit -> unit) option;
  preconnect : (bool -> unit) option;
  cleanup : (unit -> unit) option;
  list_exports : (bool -> bool -> (string * string) list) option;
  (** readonly, is_tls -> (name, description) list *)
  default_export : (bool -> bool -> string) option;

  open_connection : (bool -> 'a) option;   (** required *)
  close : ('a -> unit) option;
  get_size : ('a -> int64) option;         (** required *)
  export_description : ('a -> string) option;
  block_size : ('a -> int * int * int) option;
  can_write : ('a -> bool) option;
  can_flush : ('a -> bool) option;
  is_rotational : ('a -> bool) option;
  can_trim : ('a -> bool) option;
  can_zero : ('a -> bool) option;
  can_fast_zero : ('a -> bool) option;
  can_fua : ('a -> fua_flag) option;
  can_multi_conn : ('a -> bool) option;
  can_extents : ('a -> bool) option;
  can_cache : ('a -> cache_flag) option;

  pread : ('a -> bytes -> int64 -> int -> unit) option;
  (** required: fill the whole buffer from the offset; flags *)
  pwrite : ('a -> string -> int64 -> int -> unit) option;
  flush : ('a -> int -> unit) option;
  trim : ('a -> int32 -> int64 -> int -> unit) option;
  zero : ('a -> int32 -> int64 -> int -> unit) option;
  cache : ('a -> int32 -> int64 -> int -> unit) option;
  extents : ('a -> int32 -> int64 -> int -> extent list) option;
}

(** Every callback absent: start from this with [{ default_callbacks
    with name = ...; ... }]. *)
val default_callbacks : 'a plugin

val register_plugin : 'a plugin -> unit

(** Raised by a callback: the client gets the errno (see {!Errno}),
    the server logs the message once, prefixed with the callback's
    name.  Any other exception gives EIO (or the errno given to
    {!set_error} in the same callback) and logs the exception. *)
exception Error of int * string

module Errno : sig
  val eperm : int
  val eio : int
  val enomem : int
  val eacces : int
  val einval : int
  val enospc : int
  val erofs : int
  val enotsup : int
end

val set_error : int -> unit
val debug : ('a, unit, string, unit) format4 -> 'a
val export_name : unit -> string
val is_tls : unit -> bool
val parse_size : string -> int64
val parse_bool : string -> bool
val shutdown : unit -> unit

(** nbdkit 1.34..1.40's calls.  [disconnect force] ends the current
    connection only (forced: no reply to the request being served;
    otherwise requests in flight are answered and later ones refused
    with ESHUTDOWN).  The parsers read "0.1", "10%", "1:10", "1/10" and
    "1.5", "20ms", "3us", "9ns" (as (sec, nsec)); a bad string raises
    [Error (Errno.einval, _)], the server having logged why under the
    first argument.  In nbdkit 1.32 disconnect does nothing and the
    parsers raise [Error (Errno.enotsup, _)]. *)
val disconnect : bool -> unit
val parse_probability : string -> string -> float
val parse_delay : string -> string -> int * int

(** The server's generic USDT probe "user" (id, cookie, name, arg1,
    arg2, text); nothing in a server without it (nbdkit 1.32). *)
val probe : string -> int64 -> int64 -> string -> unit
val connection_id : unit -> int64
val request_cookie : unit -> int64

(* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) *)
(* The OCaml side of the binding: types, defaults, helpers.  The record
   given to register_plugin is read field by field by the C stubs
   (nbdkit-ocaml.c), in the order of the type below. *)

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

let flag_may_trim = 1
let flag_fua = 2
let flag_req_one = 4
let flag_fast_zero = 8

type 'a plugin = {
  name : string;
  longname : string;
  version : string;
  description : string;
  config_help : string;
  magic_config_key : string;
  thread_model : thread_model;
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
  default_export : (bool -> bool -> string) option;
  open_connection : (bool -> 'a) option;
  close : ('a -> unit) option;
  get_size : ('a -> int64) option;
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
  pwrite : ('a -> string -> int64 -> int -> unit) option;
  flush : ('a -> int -> unit) option;
  trim : ('a -> int32 -> int64 -> int -> unit) option;
  zero : ('a -> int32 -> int64 -> int -> unit) option;
  cache : ('a -> int32 -> int64 -> int -> unit) option;
  extents : ('a -> int32 -> int64 -> int -> extent list) option;
}

let default_callbacks = {
  name = ""; longname = ""; version = ""; description = "";
  config_help = ""; magic_config_key = "";
  thread_model = Serialize_all_requests;
  load = None; unload = None; config = None; config_complete = None;
  dump_plugin = None; get_ready = None; after_fork = None;
  preconnect = None; cleanup = None; list_exports = None;
  default_export = None; open_connection = None; close = None;
  get_size = None; export_description = None; block_size = None;
  can_write = None; can_flush = None; is_rotational = None;
  can_trim = None; can_zero = None; can_fast_zero = None; can_fua = None;
  can_multi_conn = None; can_extents = None; can_cache = None;
  pread = None; pwrite = None; flush = None; trim = None; zero = None;
  cache = None; extents = None;
}

exception Error of int * string
let () = Callback.register_exception "NBDKit.Error" (Error (0, ""))

module Errno = struct
  let eperm = 1
  let eio = 5
  let enomem = 12
  let eacces = 13
  let einval = 22
  let enospc = 28
  let erofs = 30
  let enotsup = 95
end

external register_stub : 'a plugin -> unit = "ocaml_nbdkit_register"
external set_error : int -> unit = "ocaml_nbdkit_set_error"
external debug_stub : string -> unit = "ocaml_nbdkit_debug"
external export_name : unit -> string = "ocaml_nbdkit_export_name"
external is_tls : unit -> bool = "ocaml_nbdkit_is_tls"
external parse_size_stub : string -> int64 = "ocaml_nbdkit_parse_size"
external parse_bool_stub : string -> int = "ocaml_nbdkit_parse_bool"
external shutdown : unit -> unit = "ocaml_nbdkit_shutdown"
external probe : string -> int64 -> int64 -> string -> unit = "ocaml_nbdkit_probe"
external connection_id : unit -> int64 = "ocaml_nbdkit_connection_id"
external request_cookie : unit -> int64 = "ocaml_nbdkit_request_cookie"
external disconnect : bool -> unit = "ocaml_nbdkit_disconnect"
external parse_probability_stub : string -> string -> int * float
  = "ocaml_nbdkit_parse_probability"
external parse_delay_stub : string -> string -> int * int * int
  = "ocaml_nbdkit_parse_delay"

let debug fs = Printf.ksprintf debug_stub fs

let parse_size s =
  let r = parse_size_stub s in
  if r < 0L then raise (Error (Errno.einval, Printf.sprintf "could not parse size %S" s));
  r

let parse_bool s =
  match parse_bool_stub s with
  | -1 -> raise (Error (Errno.einval, Printf.sprintf "could not parse boolean %S" s))
  | n -> n = 1

(* A server parser failed: -2 it is not there (nbdkit 1.32), otherwise
   the string did not parse (the server has logged why, under WHAT). *)
let parse_error rc call what s =
  if rc = -2 then
    raise (Error (Errno.enotsup, "this server has no nbdkit_" ^ call))
  else
    raise (Error (Errno.einval, Printf.sprintf "%s: could not parse %S" what s))

let parse_probability what s =
  match parse_probability_stub what s with
  | 0, d -> d
  | rc, _ -> parse_error rc "parse_probability" what s

let parse_delay what s =
  match parse_delay_stub what s with
  | 0, sec, nsec -> (sec, nsec)
  | rc, _, _ -> parse_error rc "parse_delay" what s

let register_plugin p =
  if p.name = "" then failwith "NBDKit.register_plugin: name is required";
  if p.open_connection = None || p.get_size = None || p.pread = None then
    failwith "NBDKit.register_plugin: open_connection, get_size and pread are required";
  register_stub p

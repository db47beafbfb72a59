(* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) *)
(* A plugin whose failures are on purpose, to show (and test) how errors
   cross the boundary: a 4 MiB disk of 0xAB bytes where a read at or past
   1 MiB fails with the errno given by err= (default EIO), a read at or
   past 2 MiB raises Failure (the client gets EIO, the server goes on),
   a write fails with ENOSPC, and opening the export "refuse" fails
   with EACCES.  It also drives nbdkit 1.34..1.40's calls as
   tests/lang/server-calls.sh expects: prob= and delay= parsed by the
   server, a read at 4096 or 8192 disconnecting (forced, soft), and a
   read at 12288 answering with the parsed values. *)

let errno = ref NBDKit.Errno.eio
let prob = ref 0.
let delay = ref (0, 0)

let config key value =
  match key with
  | "prob" -> prob := NBDKit.parse_probability "prob" value
  | "delay" -> delay := NBDKit.parse_delay "delay" value
  | "err" ->
     (match int_of_string_opt value with
      | Some n -> errno := n
      | None -> raise (NBDKit.Error (NBDKit.Errno.einval,
                                     Printf.sprintf "err=%s: not a number" value)))
  | _ -> raise (NBDKit.Error (NBDKit.Errno.einval,
                              Printf.sprintf "unknown parameter %S" key))

let open_connection _readonly =
  if NBDKit.export_name () = "refuse" then
    raise (NBDKit.Error (NBDKit.Errno.eacces, "export \"refuse\" is refused"))

let pread () buf off _flags =
  if off >= 2097152L then
    failwith (Printf.sprintf "read at %Ld panics on purpose" off);
  if off >= 1048576L then
    raise (NBDKit.Error (!errno, Printf.sprintf "read at %Ld fails on purpose" off));
  match off with
  | 4096L -> NBDKit.disconnect true; Bytes.fill buf 0 (Bytes.length buf) '\xab'
  | 8192L -> NBDKit.disconnect false; Bytes.fill buf 0 (Bytes.length buf) '\xab'
  | 12288L ->
     let sec, nsec = !delay in
     let line = Printf.sprintf "%.0f %d %d" (Float.round (!prob *. 1e6)) sec nsec in
     let n = min (String.length line) (Bytes.length buf) in
     Bytes.fill buf 0 (Bytes.length buf) ' ';
     Bytes.blit_string line 0 buf 0 n
  | _ -> Bytes.fill buf 0 (Bytes.length buf) '\xab'

let pwrite () _data off _flags =
  raise (NBDKit.Error (NBDKit.Errno.enospc,
                       Printf.sprintf "write at %Ld fails on purpose" off))

let () =
  NBDKit.register_plugin {
    NBDKit.default_callbacks with
    NBDKit.name = "failing";
    config = Some config;
    open_connection = Some open_connection;
    get_size = Some (fun () -> 4194304L);
    pread = Some pread;
    pwrite = Some pwrite;
  }

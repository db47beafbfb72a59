(* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) *)
(* A RAM disk in OCaml: `nbdkit ./ramdisk.so size=64M`.  Every
   connection sees the same bytes, all zero until written; trim and
   zero clear bytes, and extents reports 64 KiB blocks never written
   (or cleared) as holes.  Each write fires the server's generic probe
   "user" with the name "ramdisk_write", the offset and the length. *)

let block = 65536
let size = ref 0L
let disk = ref Bytes.empty
let written = ref [||]

let check len off =
  if off < 0L || Int64.add off (Int64.of_int len) > !size then
    raise (NBDKit.Error (NBDKit.Errno.einval, "request beyond the end of the disk"))

let mark off len data =
  if len > 0 then begin
    let off = Int64.to_int off in
    for b = off / block to (off + len - 1) / block do
      if data then !written.(b) <- true
      else begin
        let start = b * block in
        let stop = min (start + block) (Bytes.length !disk) in
        let clear = ref true in
        for i = start to stop - 1 do
          if Bytes.get !disk i <> '\000' then clear := false
        done;
        if !clear then !written.(b) <- false
      end
    done
  end

let config key value =
  match key with
  | "size" -> size := NBDKit.parse_size value
  | _ -> raise (NBDKit.Error (NBDKit.Errno.einval,
                              Printf.sprintf "unknown parameter %S" key))

let config_complete () =
  if !size = 0L then
    raise (NBDKit.Error (NBDKit.Errno.einval, "size= is required"));
  disk := Bytes.make (Int64.to_int !size) '\000';
  written := Array.make ((Int64.to_int !size + block - 1) / block) false;
  NBDKit.debug "ramdisk: %Ld bytes" !size

let pread () buf off _flags =
  check (Bytes.length buf) off;
  Bytes.blit !disk (Int64.to_int off) buf 0 (Bytes.length buf)

let pwrite () data off _flags =
  check (String.length data) off;
  Bytes.blit_string data 0 !disk (Int64.to_int off) (String.length data);
  mark off (String.length data) true;
  NBDKit.probe "ramdisk_write" off (Int64.of_int (String.length data)) ""

let zero () count off _flags =
  let len = Int32.to_int count in
  check len off;
  Bytes.fill !disk (Int64.to_int off) len '\000';
  mark off len false

let extents () count off flags =
  let size = Bytes.length !disk in
  let stop = min (Int64.to_int off + Int32.to_int count) size in
  let rec go pos acc =
    if pos >= stop then List.rev acc
    else begin
      let b = pos / block in
      let next = min ((b + 1) * block) size in
      let hole = not !written.(b) in
      let e = { NBDKit.offset = Int64.of_int pos;
                length = Int64.of_int (next - pos);
                is_hole = hole; is_zero = hole } in
      if flags land NBDKit.flag_req_one <> 0 then [e]
      else go next (e :: acc)
    end
  in
  go (Int64.to_int off) []

let () =
  NBDKit.register_plugin {
    NBDKit.default_callbacks with
    NBDKit.name = "ramdisk";
    version = "1.0";
    description = "a RAM disk written in OCaml";
    config_help = "size=<SIZE>  (required) The disk's size.";
    magic_config_key = "size";
    config = Some config;
    config_complete = Some config_complete;
    open_connection = Some (fun _readonly -> ());
    get_size = Some (fun () -> !size);
    can_multi_conn = Some (fun () -> true);
    can_extents = Some (fun () -> true);
    pread = Some pread;
    pwrite = Some pwrite;
    flush = Some (fun () _flags -> ());
    trim = Some zero;
    zero = Some zero;
    extents = Some extents;
  }

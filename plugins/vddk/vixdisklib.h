/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Our own declarations of the part of VMware's VDDK (libvixDiskLib)
 * that the vddk plugin calls, written from VMware's public programming
 * guide: the types, flags and error numbers, and one list of the
 * entry points with their signatures.
 *
 * Nothing links against the library: vddk.c dlopens it at run time
 * and looks each entry point up by name, so the list below (an
 * X-macro: VIX_FN (required?, return type, name, parameters)) is the
 * one place where a name and its signature meet.  The stand-in
 * library of the tests (test-stub/) is built from the same list, so
 * the two cannot disagree.
 */
#ifndef NBDKIT_VIXDISKLIB_H
#define NBDKIT_VIXDISKLIB_H

#include <stdarg.h>
#include <stdint.h>

/* A VixError is 64 bits; the error number is in the low 16. */
typedef uint64_t VixError;
#define VIX_OK 0
#define VIX_ERROR_CODE(err) ((err) & 0xffff)
#define VIX_E_FAIL 1
#define VIX_E_OUT_OF_MEMORY 2
#define VIX_E_INVALID_ARG 3
#define VIX_E_FILE_NOT_FOUND 4
#define VIX_E_NOT_SUPPORTED 6
#define VIX_E_DISK_FULL 8

/* Disks are addressed in sectors of this size. */
#define VIXDISKLIB_SECTOR_SIZE 512

/* VixDiskLib_Open flags. */
#define VIXDISKLIB_FLAG_OPEN_UNBUFFERED 1
#define VIXDISKLIB_FLAG_OPEN_SINGLE_LINK 2
#define VIXDISKLIB_FLAG_OPEN_READ_ONLY 4
#define VIXDISKLIB_FLAG_OPEN_COMPRESSION_ZLIB (1 << 4)
#define VIXDISKLIB_FLAG_OPEN_COMPRESSION_FASTLZ (1 << 5)
#define VIXDISKLIB_FLAG_OPEN_COMPRESSION_SKIPZ (1 << 6)

/* QueryAllocatedBlocks works in chunks of at least this many sectors,
 * and takes at most this many chunks in one call.
 */
#define VIXDISKLIB_MIN_CHUNK_SIZE 128
#define VIXDISKLIB_MAX_CHUNK_NUMBER (512 * 1024)

typedef void *VixDiskLibConnection;
typedef void *VixDiskLibHandle;
typedef void VixDiskLibGenericLogFunc (const char *fmt, va_list args);

enum VixDiskLibCredType {
  VIXDISKLIB_CRED_UID = 1,        /* user name and password */
  VIXDISKLIB_CRED_SESSIONID = 2,  /* a vSphere session cookie */
  VIXDISKLIB_CRED_TICKETID = 3,
  VIXDISKLIB_CRED_SSPI = 4,
  VIXDISKLIB_CRED_UNKNOWN = 256,
};

typedef struct {
  char *vmxSpec;                /* "moref=ID" of the VM, remote only */
  char *serverName;
  char *thumbPrint;             /* of the server's TLS certificate */
  long privateUse;
  enum VixDiskLibCredType credType;
  union {
    struct {
      char *userName;
      char *password;
    } uid;
    struct {
      char *cookie;
      char *userName;
      char *key;
    } sessionId;
    void *ticketId;
  } creds;
  uint32_t port;
  uint32_t nfcHostPort;
  char *vimApiVer;
  char reserved[8];
  void *reserved2;
} VixDiskLibConnectParams;

typedef struct {
  uint32_t cylinders;
  uint32_t heads;
  uint32_t sectors;
} VixDiskLibGeometry;

typedef struct {
  VixDiskLibGeometry biosGeo;
  VixDiskLibGeometry physGeo;
  uint64_t capacity;            /* in sectors */
  int adapterType;
  int numLinks;
  char *parentFileNameHint;
  char *uuid;
} VixDiskLibInfo;

typedef struct {
  uint64_t offset;              /* in sectors */
  uint64_t length;              /* in sectors */
} VixDiskLibBlock;

typedef struct {
  uint32_t numBlocks;
  VixDiskLibBlock blocks[1];    /* numBlocks of them */
} VixDiskLibBlockList;

/* The entry points.  Required ones must all be found; VixDiskLib_Wait
 * is among them because it came with VDDK 6.5, the oldest version the
 * plugin supports, so a library without it is too old.  The optional
 * ones came later and the plugin does without them.
 */
#define VIX_FUNCTIONS                                                   \
  VIX_FN (1, VixError, VixDiskLib_InitEx,                               \
          (uint32_t major, uint32_t minor,                              \
           VixDiskLibGenericLogFunc *log, VixDiskLibGenericLogFunc *warn, \
           VixDiskLibGenericLogFunc *panic, const char *libdir,         \
           const char *config))                                         \
  VIX_FN (1, void, VixDiskLib_Exit, (void))                             \
  VIX_FN (1, char *, VixDiskLib_GetErrorText,                           \
          (VixError err, const char *locale))                           \
  VIX_FN (1, void, VixDiskLib_FreeErrorText, (char *text))              \
  VIX_FN (1, VixError, VixDiskLib_ConnectEx,                            \
          (const VixDiskLibConnectParams *params, char read_only,       \
           const char *snapshot, const char *transports,                \
           VixDiskLibConnection *connection))                           \
  VIX_FN (1, VixError, VixDiskLib_Disconnect,                           \
          (VixDiskLibConnection connection))                            \
  VIX_FN (1, VixError, VixDiskLib_Open,                                 \
          (const VixDiskLibConnection connection, const char *path,     \
           uint32_t flags, VixDiskLibHandle *handle))                   \
  VIX_FN (1, VixError, VixDiskLib_Close, (VixDiskLibHandle handle))     \
  VIX_FN (1, VixError, VixDiskLib_GetInfo,                              \
          (VixDiskLibHandle handle, VixDiskLibInfo **info))             \
  VIX_FN (1, void, VixDiskLib_FreeInfo, (VixDiskLibInfo *info))         \
  VIX_FN (1, VixError, VixDiskLib_Read,                                 \
          (VixDiskLibHandle handle, uint64_t start_sector,              \
           uint64_t nr_sectors, unsigned char *buf))                    \
  VIX_FN (1, VixError, VixDiskLib_Write,                                \
          (VixDiskLibHandle handle, uint64_t start_sector,              \
           uint64_t nr_sectors, const unsigned char *buf))              \
  VIX_FN (1, VixError, VixDiskLib_Flush, (VixDiskLibHandle handle))     \
  VIX_FN (1, VixError, VixDiskLib_Wait, (VixDiskLibHandle handle))      \
  VIX_FN (0, const char *, VixDiskLib_GetTransportMode,                 \
          (VixDiskLibHandle handle))                                    \
  VIX_FN (0, VixDiskLibConnectParams *, VixDiskLib_AllocateConnectParams, \
          (void))                                                       \
  VIX_FN (0, void, VixDiskLib_FreeConnectParams,                        \
          (VixDiskLibConnectParams *params))                            \
  VIX_FN (0, VixError, VixDiskLib_QueryAllocatedBlocks,                 \
          (VixDiskLibHandle handle, uint64_t start_sector,              \
           uint64_t nr_sectors, uint64_t chunk_size,                    \
           VixDiskLibBlockList **list))                                 \
  VIX_FN (0, VixError, VixDiskLib_FreeBlockList,                        \
          (VixDiskLibBlockList *list))

#endif /* NBDKIT_VIXDISKLIB_H */

#include <sqlite3.h>

/* Region 0 of the connection's WAL-index (the `-shm` file), as SQLite itself has mapped it;
   NULL when the connection has no shared-memory index. Through the VFS's own xShmMap, so no
   second descriptor is ever opened on the `-shm` file: closing one would drop every POSIX lock
   this process holds on it, SQLite's included. */
static inline const void *larder_sqlite_wal_index(sqlite3 *db) {
  sqlite3_file *file = 0;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file) return 0;
  if (!file->pMethods || file->pMethods->iVersion < 2 || !file->pMethods->xShmMap) return 0;
  void volatile *region = 0;
  if (file->pMethods->xShmMap(file, 0, 32768, 0, &region) != SQLITE_OK) return 0;
  return (const void *)region;
}

/* The WAL-index header's two 48-byte copies, read as SQLite's readers do: the first copy, a
   memory barrier, then the second (writers write them the other way round), so equal copies
   are one consistent header. */
static inline void larder_sqlite_copy_wal_header(const void *index, unsigned char out[96]) {
  const volatile unsigned char *p = (const volatile unsigned char *)index;
  for (int i = 0; i < 48; i++) out[i] = p[i];
  __sync_synchronize();
  for (int i = 48; i < 96; i++) out[i] = p[i];
}

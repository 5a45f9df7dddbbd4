#ifndef HEADUNIT_CSYSTEMD_SHIM_H
#define HEADUNIT_CSYSTEMD_SHIM_H
#include <systemd/sd-daemon.h>
#include <sys/syscall.h>
#include <unistd.h>

/* memfd_create(2) without needing _GNU_SOURCE in every importer: the daemon's
   state snapshot travels through systemd's fd store in one (FDSTORE=1). */
static inline int headunit_memfd_create(const char *name) {
    return (int)syscall(SYS_memfd_create, name, 1U /* MFD_CLOEXEC */);
}
#endif

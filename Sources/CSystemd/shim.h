#ifndef HEADUNIT_CSYSTEMD_SHIM_H
#define HEADUNIT_CSYSTEMD_SHIM_H
#include <systemd/sd-daemon.h>
#endif

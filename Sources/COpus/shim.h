#ifndef HEADUNIT_COPUS_SHIM_H
#define HEADUNIT_COPUS_SHIM_H
/* libopus (Debian libopus-dev): the car decodes the phone's Opus streams
   off the serving loop (PROTOCOL.md section 24). */
#include <opus.h>
#endif

#ifndef HEADUNIT_CALSA_SHIM_H
#define HEADUNIT_CALSA_SHIM_H
/* alsa-lib (Debian libasound2-dev): the car's speakers and microphone on a
   board, "alsa:DEVICE" in DaemonConfig.audio (PROTOCOL.md section 24.5).
   PipeWire and PulseAudio serve ALSA clients through their ALSA plugins. */
#include <alsa/asoundlib.h>
#endif

// Cisco's OpenH264 (Debian libopenh264-dev): the H.264 constrained-baseline
// encoder the phone side uses, and the decoder the car-side tests use
// (PROTOCOL.md section 25.2 says why this library).
#include <stdbool.h>
#include <wels/codec_api.h>

// cairo (Debian libcairo2-dev): the 2-D drawing library the MapsApp example
// draws its map with, into the BGRA pixels of a CarPlayKit window
// (cairo's FORMAT_ARGB32 is BGRA in memory on a little-endian machine).
#include <cairo.h>

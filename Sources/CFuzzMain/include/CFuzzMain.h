#ifndef HEADUNIT_CFUZZMAIN_H
#define HEADUNIT_CFUZZMAIN_H
/* This target provides HeadUnitFuzz_main (see CFuzzMain.c). */
void headunit_fuzz_main_anchor(void);
#endif

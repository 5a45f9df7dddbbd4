// Without --sanitize=fuzzer the fuzz executable still links and runs: SwiftPM
// links an executable's entry point as `<Module>_main`, and this one replays the
// files named on the command line through the fuzz entry point (a crash
// reproducer runs as `HeadUnitFuzz crash-file`). Under --sanitize=fuzzer SwiftPM
// builds the module as a library and libFuzzer's own main is used instead.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "CFuzzMain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int headunit_write_family_seeds(const char *directory);

void headunit_fuzz_main_anchor(void) {}

int HeadUnitFuzz_main(int argc, char **argv) {
    /* HeadUnitFuzz --write-family-seeds DIR: the committed per-family corpus. */
    if (argc == 3 && strcmp(argv[1], "--write-family-seeds") == 0) return headunit_write_family_seeds(argv[2]);
    int replayed = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;  /* libFuzzer-style flags are ignored here */
        FILE *file = fopen(argv[i], "rb");
        if (!file) { fprintf(stderr, "cannot open %s\n", argv[i]); return 2; }
        fseek(file, 0, SEEK_END);
        long size = ftell(file);
        fseek(file, 0, SEEK_SET);
        uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
        size_t got = fread(data, 1, (size_t)size, file);
        fclose(file);
        LLVMFuzzerTestOneInput(data, got);
        free(data);
        replayed++;
    }
    printf("replayed %d input(s) without crashing\n", replayed);
    return 0;
}

/* libFuzzer target: arbitrary bytes from a (compromised) driver, fed to the channel decoder in
 * uneven pieces, with a large frame allowed now and then (as for an execution's result). */
#include "service/channel.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct channel_decoder d;
    channel_decoder_init(&d, 1 << 16, 1 << 10);
    size_t off = 0, step = size ? (size_t)data[0] % 7 + 1 : 1;
    while (off < size) {
        size_t n = size - off < step ? size - off : step;
        channel_feed(&d, data + off, n);
        off += n;
        if (data[off - 1] & 1)
            channel_allow_large(&d);
        json_t *frame;
        int r;
        while ((r = channel_next(&d, &frame)) == 1)
            json_decref(frame);
        if (r < 0)
            break; /* the service kills the driver here */
    }
    channel_decoder_free(&d);
    return 0;
}

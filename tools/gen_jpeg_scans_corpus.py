"""Writes tools/corpus/image/progressive_501_scans.jpg: spec/fixtures/images/
progressive.jpg with its DC refinement scan (Ss = Se = 0, Ah = 1, Al = 0)
repeated until the file has 501 scans, one more than lunet's limit (as
libjpeg-turbo's TJFLAG_LIMITSCANS). A repeated DC refinement ORs the same
bit into each DC coefficient again, so libjpeg decodes such a file to the
original image, only slower: each scan is a pass over the whole image.
spec/data_image_spec.lua builds the same splice in Lua (500 scans decode,
501 are refused). Run: /usr/bin/python3 tools/gen_jpeg_scans_corpus.py (PIL checks the result)"""
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def with_scans(data, total):
    i, scans, dc = 2, 0, None
    while True:
        assert data[i] == 0xFF, i
        m = data[i + 1]
        if m == 0xD9:
            break
        j = i + 2 + (data[i + 2] << 8 | data[i + 3])
        if m == 0xDA:
            scans += 1
            while not (data[j] == 0xFF and data[j + 1] != 0 and not 0xD0 <= data[j + 1] <= 0xD7):
                j += 1
            ns = data[i + 4]
            if data[i + 5 + 2 * ns: i + 8 + 2 * ns] == b"\x00\x00\x10":
                dc = (i, j)
        i = j
    scan = data[dc[0]:dc[1]]
    return data[:dc[1]] + scan * (total - scans) + data[dc[1]:]


if __name__ == "__main__":
    src = open(os.path.join(ROOT, "spec/fixtures/images/progressive.jpg"), "rb").read()
    out = with_scans(src, 501)
    with open(os.path.join(ROOT, "tools/corpus/image/progressive_501_scans.jpg"), "wb") as f:
        f.write(out)
    from PIL import Image   # (PIL, without a limit, decodes it as the original)
    import io
    assert list(Image.open(io.BytesIO(out)).convert("RGB").getdata()) == \
        list(Image.open(io.BytesIO(src)).convert("RGB").getdata())
    print("wrote", len(out), "bytes")

/* tiny.c -- lunet from C: one convolution trained a few SGD steps on
 * 0.5 * sum(conv(x)^2), errors checked with ln_last_error. The same program
 * opens c/include/lunet.h; spec/header_spec.lua builds and runs this copy.
 *   cc -Ic/include examples/c/tiny.c -Lbuild -llunet -Wl,-rpath,build -o tiny */
#include <stdio.h>
#include "lunet.h"

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s\n", ln_last_error()); return 1; } } while (0)

// 0.5 * sum(out^2), read back to the host
static double loss_of(ln_tensor *out) {
  float v[2 * 4 * 6 * 6];
  if (ln_tensor_read(out, v) != 0) return -1;
  double s = 0;
  for (int i = 0; i < 2 * 4 * 6 * 6; i++) s += 0.5 * v[i] * v[i];
  return s;
}

int main(void) {
  int64_t xs[4] = {2, 3, 8, 8}, ws[4] = {4, 3, 3, 3}, bs[1] = {4}, os[4] = {2, 4, 6, 6};
  ln_tensor *x = ln_empty(4, xs, LN_FLOAT32, 0), *w = ln_empty(4, ws, LN_FLOAT32, 0);
  ln_tensor *b = ln_empty(1, bs, LN_FLOAT32, 0), *out = ln_empty(4, os, LN_FLOAT32, 0);
  ln_tensor *dw = ln_empty(4, ws, LN_FLOAT32, 0), *db = ln_empty(1, bs, LN_FLOAT32, 0);
  CHECK(x && w && b && out && dw && db);
  ln_manual_seed(0);
  CHECK(ln_normal_(x, 0, 1) == 0 && ln_uniform_(w, -0.2, 0.2) == 0 && ln_fill_(b, 0.1) == 0);

  ln_conv2d_params p = {1, 1, 0, 0, 1, 1, 1};   // stride 1, padding 0, dilation 1, groups 1
  ln_sgd_params sgd = {.lr = 0.01};
  double first = 0, last = 0;
  for (int step = 0; step < 5; step++) {
    CHECK(ln_conv2d_forward(out, x, w, b, &p) == 0);   // out (2,4,6,6)
    last = loss_of(out);
    CHECK(last >= 0);
    if (step == 0) first = last;
    // d loss / d out = out; no input gradient wanted (din NULL)
    CHECK(ln_conv2d_backward(NULL, dw, db, out, x, w, &p) == 0);
    CHECK(ln_sgd_step_(w, dw, NULL, &sgd) == 0 && ln_sgd_step_(b, db, NULL, &sgd) == 0);
  }
  printf("loss %.4f -> %.4f\n", first, last);

  // a wrong call fails where it is made, with a message naming the problem
  if (ln_conv2d_forward(out, w, x, b, &p) == 0) return 1;
  printf("error: %s\n", ln_last_error());

  ln_tensor *all[] = {x, w, b, out, dw, db};
  for (int i = 0; i < 6; i++) ln_tensor_free(all[i]);
  return last < first ? 0 : 1;
}

/* glibc's vector math (libmvec, 4-wide SSE variants) against its scalar libm, float32:
 * how many ulps apart per function over 65536 inputs in the ranges bench_c.py uses
 * (u in [-10, 10]; p in [0.001, 100]; atan2(u, p - 50); pow(p, p)).
 *
 *     cc -O1 benchmarks/libmvec_ulps.c -o /tmp/libmvec_ulps -lmvec -lm && /tmp/libmvec_ulps
 *
 * x86-64 with glibc >= 2.35 only (tanhf, log1pf and atan2f have vector variants from 2.35).
 * The generated C does not use libmvec (docs/deploying.md says why); this measures what it
 * would cost in the last bits. */
#include <stdio.h>
#include <math.h>
#include <string.h>
#include <stdint.h>
#include <stdlib.h>
#include <immintrin.h>
__m128 _ZGVbN4v_expf(__m128); __m128 _ZGVbN4v_logf(__m128); __m128 _ZGVbN4v_sinf(__m128); __m128 _ZGVbN4v_cosf(__m128);
__m128 _ZGVbN4v_tanhf(__m128); __m128 _ZGVbN4v_log1pf(__m128); __m128 _ZGVbN4vv_atan2f(__m128, __m128); __m128 _ZGVbN4vv_powf(__m128, __m128);
static double ulp(float a, float b){ if (a==b || (isnan(a)&&isnan(b))) return 0; float s = fabsf(b); return fabs((double)a-(double)b)/ (double)(nextafterf(s, INFINITY)-s); }
#define N 65536
int main(void){
  static float u[N], p[N], o[N], r[N]; srand(0);
  for (int i=0;i<N;i++){ u[i]=(float)rand()/RAND_MAX*20-10; p[i]=0.001f+(float)rand()/RAND_MAX*99.999f; }
  #define RUN1(name, V, S, X) { double mx=0; int eq=0; for(int i=0;i<N;i+=4){ __m128 x=_mm_loadu_ps(X+i); _mm_storeu_ps(o+i, V(x)); } for(int i=0;i<N;i++){ r[i]=S(X[i]); double d=ulp(o[i],r[i]); if(d>mx)mx=d; eq+=d==0;} printf("%-6s max %.0f ulps, equal %.1f%%\n", name, mx, 100.0*eq/N); }
  #define RUN2(name, V, S, X, Y, OFF) { double mx=0; int eq=0; for(int i=0;i<N;i+=4){ __m128 x=_mm_loadu_ps(X+i), y=_mm_sub_ps(_mm_loadu_ps(Y+i), _mm_set1_ps(OFF)); _mm_storeu_ps(o+i, V(x,y)); } for(int i=0;i<N;i++){ r[i]=S(X[i], Y[i]-OFF); double d=ulp(o[i],r[i]); if(d>mx)mx=d; eq+=d==0;} printf("%-6s max %.0f ulps, equal %.1f%%\n", name, mx, 100.0*eq/N); }
  RUN1("exp", _ZGVbN4v_expf, expf, u) RUN1("log", _ZGVbN4v_logf, logf, p) RUN1("sin", _ZGVbN4v_sinf, sinf, u)
  RUN1("cos", _ZGVbN4v_cosf, cosf, u) RUN1("tanh", _ZGVbN4v_tanhf, tanhf, u) RUN1("log1p", _ZGVbN4v_log1pf, log1pf, p)
  RUN2("atan2", _ZGVbN4vv_atan2f, atan2f, u, p, 50.0f) RUN2("pow", _ZGVbN4vv_powf, powf, p, p, 0.0f)
  return 0;
}

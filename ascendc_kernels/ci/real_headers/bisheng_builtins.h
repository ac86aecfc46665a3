// Stand-ins for what the bisheng compiler (AscendC's device compiler) provides
// built in, so that g++ can type-check the kernels against the REAL AscendC
// headers (asc-devkit).  Force-included by ci/check_real_headers.sh; never
// part of a build.  Nothing here was copied from a header: bisheng's builtins
// are not public, so each item is the least that lets the real headers parse.
//
// Where each group comes from:
//  * keywords: `__aicore__`, `__host__`, `__host_aicore__` are defined by
//    impl/utils/sys_macros.h only `#ifndef` (as bisheng attributes), so they
//    are predefined empty here; the address-space qualifiers (`__gm__`,
//    `__cbuf__` = L1, `__ubuf__` = UB, `__ca__`/`__cb__` = L0A/L0B,
//    `__cc__` = L0C, `__fbuf__`, `__biasbuf__`, `__ssbuf__`) and the pipe
//    annotations (`__in_pipe__(..)`, `__out_pipe__(..)`, `__inout_pipe__(..)`,
//    `__sync_alias__`, `__check_sync_alias__`, `__simd_callee__`) are used by
//    the headers undefined, i.e. built into bisheng.  Erasing the address
//    spaces merges overloads that differ only in them: the known
//    `asc_dump` redefinitions of impl/utils/debug/asc_aicore_dump_impl.h.
//  * types: `half` (FP16; g++'s _Float16), `bfloat16_t` (a struct: g++ 12 has
//    no __bf16), `size_t`, and the enums the headers use by name: pipe_t
//    (enumerator values as in tools/build/asc_op_compile_base/c_api/
//    asc_platform.h, `enum class PIPE`), event_t, QuantMode_t, Order_t, pad_t,
//    dcci_dst_t, cache_line_t, addr_cal_mode_t, ConvRelu_t (CRMODE_*, dav_c100),
//    csize_t, ub_addr8_t (VA0..VA7), vld_va_mode_t; enumerator lists are the
//    names the headers spell (grep of include/ and impl/), values arbitrary.
//    Register types of the reg_compute API (MaskReg, AddrReg, vector_bool,
//    vector_align, vector_address) are opaque.
//  * intrinsics: every builtin function the headers call for __NPU_ARCH__ 1001
//    and, in each of the script's three 910B passes (common path, cube core,
//    vector core), for 2201; collected from g++'s "not declared" diagnostics
//    on the headers, asc-devkit commit 0da921b9, 2026-07-23.  Their
//    signatures are not public, so each is a catch-all template: the check
//    verifies OUR calls into the AscendC API (argument types, overloads,
//    which APIs exist on which chip), not the API's calls into the compiler.
//    Those whose value the headers use return int64_t (get_*, bit counts) or
//    a value convertible to anything (scalar conv_*, ld_dev).
//  * globals: `block_idx`, `block_num` (dav_c100 reads them as variables).
#ifndef SGEMM_CUBE_CI_REAL_HEADERS_BISHENG_BUILTINS_H
#define SGEMM_CUBE_CI_REAL_HEADERS_BISHENG_BUILTINS_H

#include <cmath>
#include <cstddef>
#include <cstdint>

using std::max_align_t;
using std::size_t;

#define __aicore__
#define __host__
#define __host_aicore__
#define __global__
#define __gm__
#define __cbuf__
#define __ubuf__
#define __ca__
#define __cb__
#define __cc__
#define __fbuf__
#define __ssbuf__
#define __biasbuf__
#define __simd_callee__
#define __sync_alias__
#define __check_sync_alias__
#define __inout_pipe__(...)
#define __in_pipe__(...)
#define __out_pipe__(...)

typedef _Float16 half;
struct bfloat16_t {
    bfloat16_t() = default;
    bfloat16_t(float);
    operator float() const;
};

enum pipe_t {
    PIPE_S = 1, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_MTE4, PIPE_MTE5, PIPE_V2, PIPE_ALL, PIPE_FIX,
    PIPE_VLD, PIPE_VST, PIPE_LD, PIPE_ST, PIPE_LD_ST, PIPE_VEXE, PIPE_AIV_MTE2, PIPE_AIC_MTE3, PIPE_AIC_MTE1
};
enum event_t { EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };
enum QuantMode_t {
    NoQuant, F322F16, F322BF16, DEQF16, DEQS16, VDEQF16, VDEQS16, REQ4, REQ8, VREQ4, VREQ8, QF322B8_PRE,
    VQF322B8_PRE, QF322F16_PRE, VQF322F16_PRE, QF322BF16_PRE, VQF322BF16_PRE, QF322F32_PRE, VQF322F32_PRE,
    QF322FP8_PRE, VQF322FP8_PRE, QF322HIF8_PRE, VQF322HIF8_PRE, QF322HIF8_PRE_HYBRID, VQF322HIF8_PRE_HYBRID,
    QS322BF16_PRE, VQS322BF16_PRE, QF162B8_PRE, VQF162B8_PRE, QF162S16_PRE, VQF162S16_PRE, QF162S4_PRE, VQF162S4_PRE
};
enum Order_t { VALUE_INDEX, INDEX_VALUE, ONLY_VALUE, ONLY_INDEX };
enum pad_t { PAD_NONE };
enum dcci_dst_t { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
enum cache_line_t { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum addr_cal_mode_t { inc };
enum dec_t { dec };
enum mem_t {};
enum mem_dsb_t {};
enum atomic_type_t {};
enum atomic_op_t {};
enum ConvRelu_t {
    CRMODE_NONE, CRMODE_F32toF16_NONE, CRMODE_F32toF16_RELU, CRMODE_S32toF16_NONE, CRMODE_F16toF32_NONE,
    CRMODE_NONE_RELU, CRMODE_F16_MUL, CRMODE_S32toF16_DEQSCALE_SPR, CRMODE_DEQSCALE_VDEQ8, CRMODE_DEQSCALE_DEQ8,
    CRMODE_DEQSCALE_VDEQ16, CRMODE_DEQSCALE_DEQ16, CRMODE_DEQSCALE_VDEQS16, CRMODE_DEQSCALE_DEQS16
};
enum csize_t { CSIZE0, CSIZE1 };
enum ub_addr8_t { VA0, VA1, VA2, VA3, VA4, VA5, VA6, VA7 };
enum vld_va_mode_t { L128, H128 };

struct MaskReg {};
struct AddrReg {};
struct vector_bool {};
struct vector_align {};
struct vector_address {};

namespace bisheng {
namespace cce {
void metrics_prof_start();
void metrics_prof_stop();
}  // namespace cce
}  // namespace bisheng

extern int64_t block_idx;
extern int64_t block_num;

/// A builtin's result used as a value of whatever type the header needs.
struct SgcBuiltinValue {
    template <class T>
    operator T() const;
};

#define SGC_BUILTIN_VOID(name) template <class... A> void name(A&&...);
#define SGC_BUILTIN_I64(name) template <class... A> int64_t name(A&&...);
#define SGC_BUILTIN_VALUE(name) template <class... A> SgcBuiltinValue name(A&&...);

#define SGC_VOID_BUILTINS(X) \
    X(__ib_set_stub) X(__ib_wait_stub) X(__sync_all_stub) X(asc_prof_start) X(asc_prof_stop) X(copy_cbuf_to_bt) \
    X(copy_cbuf_to_fbuf) X(copy_cbuf_to_gm) X(copy_cbuf_to_ubuf) X(copy_gm_to_cbuf) \
    X(copy_gm_to_cbuf_multi_nd2nz_b16) X(copy_gm_to_cbuf_multi_nd2nz_b32s) X(copy_gm_to_cbuf_multi_nd2nz_b8) \
    X(copy_gm_to_ubuf) X(copy_gm_to_ubuf_align_b32) X(copy_matrix_cc_to_ubuf) X(copy_matrix_ubuf_to_cc) \
    X(copy_ubuf_to_cbuf) X(copy_ubuf_to_gm) X(copy_ubuf_to_gm_align_v2) X(copy_ubuf_to_ubuf) \
    X(copy_vector_cc_to_ubuf) X(copy_vector_ubuf_to_cc) X(create_ca_matrix) X(create_cb_matrix) \
    X(create_cbuf_matrix) X(dc_preload) X(dcci) X(dsb) X(ffts_cross_core_sync) X(hset_flag) X(hwait_flag) \
    X(img2colv2_cbuf_to_ca) X(img2colv2_cbuf_to_ca_s4) X(img2colv2_cbuf_to_cb) X(load_cbuf_to_ca) \
    X(load_cbuf_to_ca_s4) X(load_cbuf_to_cb) X(load_cbuf_to_cb_s4) X(load_cbuf_to_cb_sp) \
    X(load_cbuf_to_cb_transpose_s4) X(mad) X(mad_sp) X(pipe_barrier) X(preload) X(scatter_vnchwconv_b16) \
    X(scatter_vnchwconv_b32) X(scatter_vnchwconv_b8) X(set_aipp_spr_0) X(set_aipp_spr_1) X(set_aipp_spr_18) \
    X(set_aipp_spr_19) X(set_aipp_spr_2) X(set_aipp_spr_20) X(set_aipp_spr_21) X(set_aipp_spr_3) X(set_aipp_spr_4) \
    X(set_aipp_spr_5) X(set_aipp_spr_6) X(set_aipp_spr_7) X(set_aipp_spr_8) X(set_aipp_spr_9) X(set_atomic_add) \
    X(set_atomic_bf16) X(set_atomic_f16) X(set_atomic_f32) X(set_atomic_max) X(set_atomic_min) X(set_atomic_none) \
    X(set_atomic_s16) X(set_atomic_s32) X(set_atomic_s8) X(set_cmpmask) X(set_ctrl) X(set_data_exp_0) \
    X(set_data_exp_1) X(set_data_exp_2) X(set_data_exp_3) X(set_deqscale) X(set_ffts_base_addr) X(set_flag) \
    X(set_fmatrix) X(set_fmatrix_b) X(set_fpc) X(set_l1_3d_size) X(set_l3d_rpt) X(set_mask_count) X(set_mask_norm) \
    X(set_mov_pad_val) X(set_nd_para) X(set_padding) X(set_quant_pre) X(set_st_atomic_cfg) X(set_va_reg_sb) \
    X(set_vector_mask) X(st_dev) X(trap) X(vabs) X(vadd) X(vadds) X(vand) X(vbrcb) X(vcadd) X(vcmpv_eq) \
    X(vcmpvs_eq) X(vconv_bf162f32) X(vconv_bf162s32a) X(vconv_bf162s32c) X(vconv_bf162s32f) X(vconv_bf162s32r) \
    X(vconv_bf162s32z) X(vconv_deq) X(vconv_f162f32) X(vconv_f162s16a) X(vconv_f162s16c) X(vconv_f162s16f) \
    X(vconv_f162s16r) X(vconv_f162s16z) X(vconv_f162s32a) X(vconv_f162s32c) X(vconv_f162s32f) X(vconv_f162s32r) \
    X(vconv_f162s32z) X(vconv_f162s4) X(vconv_f162s4a) X(vconv_f162s4c) X(vconv_f162s4f) X(vconv_f162s4r) \
    X(vconv_f162s4z) X(vconv_f162s8) X(vconv_f162s8a) X(vconv_f162s8c) X(vconv_f162s8f) X(vconv_f162s8r) \
    X(vconv_f162s8z) X(vconv_f162u8) X(vconv_f162u8a) X(vconv_f162u8c) X(vconv_f162u8f) X(vconv_f162u8r) \
    X(vconv_f162u8z) X(vconv_f322bf16a) X(vconv_f322bf16c) X(vconv_f322bf16f) X(vconv_f322bf16r) X(vconv_f322bf16z) \
    X(vconv_f322f16) X(vconv_f322f16a) X(vconv_f322f16c) X(vconv_f322f16f) X(vconv_f322f16o) X(vconv_f322f16r) \
    X(vconv_f322f16z) X(vconv_f322f32a) X(vconv_f322f32c) X(vconv_f322f32f) X(vconv_f322f32r) X(vconv_f322f32z) \
    X(vconv_f322s16a) X(vconv_f322s16c) X(vconv_f322s16f) X(vconv_f322s16r) X(vconv_f322s16z) X(vconv_f322s32a) \
    X(vconv_f322s32c) X(vconv_f322s32f) X(vconv_f322s32r) X(vconv_f322s32z) X(vconv_f322s64a) X(vconv_f322s64c) \
    X(vconv_f322s64f) X(vconv_f322s64r) X(vconv_f322s64z) X(vconv_s162f16) X(vconv_s162f16a) X(vconv_s162f16c) \
    X(vconv_s162f16f) X(vconv_s162f16r) X(vconv_s162f16z) X(vconv_s162f32) X(vconv_s322f32) X(vconv_s322f32a) \
    X(vconv_s322f32c) X(vconv_s322f32f) X(vconv_s322f32r) X(vconv_s322f32z) X(vconv_s322s16) X(vconv_s322s64) \
    X(vconv_s42f16) X(vconv_s642f32a) X(vconv_s642f32c) X(vconv_s642f32f) X(vconv_s642f32r) X(vconv_s642f32z) \
    X(vconv_s642s32) X(vconv_s82f16) X(vconv_u82f16) X(vcopy) X(vdiv) X(vector_dup) X(vexp) X(vgather) \
    X(vld_va_reg) X(vln) X(vmax) X(vmin) X(vmul) X(vmulconv_f162s8) X(vmulconv_f162u8) X(vmuls) X(vnot) X(vor) \
    X(vrec) X(vreducev2) X(vrelu) X(vrsqrt) X(vsel) X(vsqrt) X(vsub) X(vtranspose) X(wait_flag) X(wait_flag_dev)
// Reached only by the 910B cube pass (copy_matrix_cc_to_gm: Fixpipe's
// `if ASCEND_IS_AIC` body and the `#if defined(__DAV_CUBE__)` L0C dump) or the
// vector pass (the rest, through `if ASCEND_IS_AIV` bodies: ReduceMax,
// BlockReduceSum/Max, Compare/CompareScalar, Maxs, Mins, ShiftRight); every
// call is a statement (`return f(...)` in a void function at most).
#define SGC_SPLIT_CORE_VOID_BUILTINS(X) \
    X(copy_matrix_cc_to_gm) X(vcgadd) X(vcgmax) X(vcmax) X(vcmpv_ge) X(vcmpv_gt) X(vcmpv_le) X(vcmpv_lt) \
    X(vcmpv_ne) X(vcmpvs_ge) X(vcmpvs_gt) X(vcmpvs_le) X(vcmpvs_lt) X(vcmpvs_ne) X(vmaxs) X(vmins) X(vshr)
#define SGC_I64_BUILTINS(X) \
    X(bcnt0) X(bcnt1) X(clz) X(get_acc_val) X(get_arch_ver) X(get_block_idx) X(get_block_num) X(get_coreid) \
    X(get_ctrl) X(get_icache_prl_st) X(get_imm) X(get_max_min_cnt) X(get_pc) X(get_rsvd_cnt) X(get_st_atomic_cfg) \
    X(get_status) X(get_subblockdim) X(get_subblockid) X(get_sys_cnt) X(get_vms4_sr) X(sbitset0) X(sbitset1) \
    X(sff0) X(sff1) X(sflbits)
#define SGC_VALUE_BUILTINS(X) \
    X(conv_f322f16o) X(conv_f322s32a) X(conv_f322s32c) X(conv_f322s32f) X(conv_f322s32r) X(ld_dev)

SGC_VOID_BUILTINS(SGC_BUILTIN_VOID)
SGC_SPLIT_CORE_VOID_BUILTINS(SGC_BUILTIN_VOID)
SGC_I64_BUILTINS(SGC_BUILTIN_I64)
SGC_VALUE_BUILTINS(SGC_BUILTIN_VALUE)

#endif  // SGEMM_CUBE_CI_REAL_HEADERS_BISHENG_BUILTINS_H

//===- StepBuilder.cpp - build the @step function of a model --------------===//
#include "StepBuilder.h"

#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cmath>

using namespace mlir;

namespace llmc {

const char *toString(WeightRole role) {
  switch (role) {
  case WeightRole::kTokenEmbedding: return "token embedding";
  case WeightRole::kAttnNorm: return "attention norm";
  case WeightRole::kQuery: return "query projection";
  case WeightRole::kKey: return "key projection";
  case WeightRole::kValue: return "value projection";
  case WeightRole::kQueryBias: return "query bias";
  case WeightRole::kKeyBias: return "key bias";
  case WeightRole::kValueBias: return "value bias";
  case WeightRole::kQueryNorm: return "query norm (per head)";
  case WeightRole::kKeyNorm: return "key norm (per head)";
  case WeightRole::kAttnOutput: return "attention output projection";
  case WeightRole::kMlpNorm: return "MLP norm";
  case WeightRole::kPostAttnNorm: return "post-attention norm";
  case WeightRole::kPostMlpNorm: return "post-MLP norm";
  case WeightRole::kGate: return "MLP gate projection";
  case WeightRole::kUp: return "MLP up projection";
  case WeightRole::kDown: return "MLP down projection";
  case WeightRole::kRouter: return "MoE router";
  case WeightRole::kGateExperts: return "MoE gate experts";
  case WeightRole::kUpExperts: return "MoE up experts";
  case WeightRole::kDownExperts: return "MoE down experts";
  case WeightRole::kFinalNorm: return "final norm";
  case WeightRole::kLMHead: return "LM head";
  case WeightRole::kRopeFreqFactors: return "RoPE frequency factors";
  }
  return "?";
}

namespace {

// Builds the ops of one model into a func.func, one helper per sub-block.
class StepBuilder {
public:
  StepBuilder(MLIRContext &ctx, const ModelConfig &config, const WeightCatalog &catalog,
              Type actType)
      : ctx(ctx), b(&ctx), config(config), catalog(catalog), actType(actType) {}

  OwningOpRef<ModuleOp> build();

private:
  RankedTensorType activation(int64_t features) {
    return RankedTensorType::get({ShapedType::kDynamic, features}, actType);
  }
  Location loc(const std::string &name) { return NameLoc::get(b.getStringAttr(name)); }

  // Returns the weight for `role`, or null after reporting it missing when
  // `required`.
  Value weight(WeightRole role, int layer, ArrayRef<int64_t> shape, bool required = true);
  Value layer(int index, Value hidden);
  Value attention(int index, Value hidden);
  Value mlp(int index, Value hidden);
  Value moe(int index, Value hidden);
  // hidden + out, with out RMS-normed first where the model norms each
  // block's output (Gemma's post_attention_norm / post_ffw_norm).
  Value residual(int index, WeightRole postNorm, Location l, Value hidden, Value out);
  DictionaryAttr configAttr();

  MLIRContext &ctx;
  OpBuilder b;
  const ModelConfig &config;
  const WeightCatalog &catalog;
  Type actType;
  bool failed = false;
  // Arguments of @step.
  Value positions, queryStarts, contextLens, blockTables, slotMapping;
  SmallVector<Value> caches;
};

Value StepBuilder::weight(WeightRole role, int layer, ArrayRef<int64_t> shape, bool required) {
  absl::StatusOr<std::optional<WeightEntry>> found = catalog.find(role, layer, shape);
  if (!found.ok()) {
    if (!failed)
      emitError(UnknownLoc::get(&ctx)) << std::string(found.status().message());
    failed = true;
    return {};
  }
  const std::optional<WeightEntry> &entry = *found;
  if (!entry) {
    if (required && !failed) {
      InFlightDiagnostic d = emitError(UnknownLoc::get(&ctx)) << "model has no " << toString(role);
      if (layer >= 0)
        d << " in layer " << layer;
      d << ": expected " << catalog.describe(role, layer);
      failed = true;
    }
    return {};
  }
  auto type = llm::WeightType::getChecked(
      [&] { return emitError(UnknownLoc::get(&ctx)) << "weight '" << entry->name << "': "; },
      &ctx, shape, entry->format, entry->group);
  if (!type) {
    failed = true;
    return {};
  }
  SmallVector<int64_t> rows;
  for (auto [begin, end] : entry->rows)
    rows.append({begin, end});
  ArrayAttr parts;
  if (!entry->parts.empty())
    parts = b.getStrArrayAttr(SmallVector<StringRef>(entry->parts.begin(), entry->parts.end()));
  return b.create<llm::WeightOp>(
      loc(entry->name), type, entry->name, parts,
      rows.empty() ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(rows), StringAttr(),
      llm::ShardAttr(), entry->offset != 0 ? b.getF64FloatAttr(entry->offset) : FloatAttr());
}

Value StepBuilder::attention(int i, Value hidden) {
  const ModelConfig &c = config;
  std::string prefix = "layers." + std::to_string(i) + ".attn";
  Location l = loc(prefix);
  Value normWeight = weight(WeightRole::kAttnNorm, i, {c.hidden_size});
  if (failed)
    return {};
  Value norm =
      b.create<llm::RMSNormOp>(l, hidden, normWeight, b.getF64FloatAttr(c.rms_norm_eps));
  auto project = [&](WeightRole role, WeightRole biasRole, int64_t out) -> Value {
    Value w = weight(role, i, {out, c.hidden_size});
    Value bias = c.attention_bias ? weight(biasRole, i, {out}) : Value();
    if (failed)
      return {};
    return b.create<llm::LinearOp>(l, activation(out), norm, w, bias);
  };
  Value q = project(WeightRole::kQuery, WeightRole::kQueryBias, c.q_size());
  Value k = project(WeightRole::kKey, WeightRole::kKeyBias, c.kv_size());
  Value v = project(WeightRole::kValue, WeightRole::kValueBias, c.kv_size());
  if (failed)
    return {};
  // Qwen3: each head of Q and K normalized on its own, before RoPE.
  auto headNorm = [&](Value x, WeightRole role) -> Value {
    Value w = weight(role, i, {c.head_dim});
    if (failed)
      return {};
    return b.create<llm::RMSNormOp>(l, x, w, b.getF64FloatAttr(c.rms_norm_eps),
                                    b.getI64IntegerAttr(c.head_dim));
  };
  if (c.qk_norm) {
    q = headNorm(q, WeightRole::kQueryNorm);
    k = headNorm(k, WeightRole::kKeyNorm);
    if (failed)
      return {};
  }

  // Gemma 3's sliding layers rotate with their own base, unscaled.
  const bool sliding = c.sliding_layer(i);
  const bool localRope = sliding && c.rope_local_theta > 0;
  const double theta = localRope ? c.rope_local_theta : c.rope_theta;
  llm::RopeScalingAttr scaling;
  if (c.rope_scaling.kind != RopeScaling::Kind::kNone && !localRope) {
    auto kind = c.rope_scaling.kind == RopeScaling::Kind::kLinear ? llm::RopeScalingKind::linear
                                                                   : llm::RopeScalingKind::llama3;
    scaling = llm::RopeScalingAttr::get(&ctx, kind, b.getF64FloatAttr(c.rope_scaling.factor),
                                        b.getF64FloatAttr(c.rope_scaling.low_freq_factor),
                                        b.getF64FloatAttr(c.rope_scaling.high_freq_factor),
                                        c.rope_scaling.original_max_position);
  }
  auto style = c.rope_style == RopeStyle::kHalf ? llm::RopeStyle::half : llm::RopeStyle::interleaved;
  Value freqFactors;
  if (c.rope_freq_factors) {
    freqFactors = weight(WeightRole::kRopeFreqFactors, -1, {c.head_dim / 2});
    if (failed)
      return {};
  }
  auto rope = [&](Value x, int64_t heads) -> Value {
    return b.create<llm::RopeOp>(l, x.getType(), x, positions, freqFactors,
                                 b.getI64IntegerAttr(heads),
                                 b.getI64IntegerAttr(c.head_dim), b.getF64FloatAttr(theta),
                                 llm::RopeStyleAttr::get(&ctx, style), scaling);
  };
  q = rope(q, c.num_heads);
  k = rope(k, c.num_kv_heads);

  IntegerAttr window = sliding ? b.getI64IntegerAttr(c.sliding_window) : IntegerAttr();
  const double scalar = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : double(c.head_dim);
  FloatAttr softcap =
      c.attn_logit_softcap > 0 ? b.getF64FloatAttr(c.attn_logit_softcap) : FloatAttr();
  Value attn = b.create<llm::PagedAttentionOp>(
      l, activation(c.q_size()), q, k, v, caches[i], slotMapping, queryStarts, contextLens,
      blockTables, b.getI64IntegerAttr(c.num_heads), b.getI64IntegerAttr(c.num_kv_heads),
      b.getI64IntegerAttr(c.head_dim), b.getF64FloatAttr(1.0 / std::sqrt(scalar)), window,
      softcap);
  Value wo = weight(WeightRole::kAttnOutput, i, {c.hidden_size, c.q_size()});
  if (failed)
    return {};
  Value out = b.create<llm::LinearOp>(l, activation(c.hidden_size), attn, wo, Value());
  return residual(i, WeightRole::kPostAttnNorm, l, hidden, out);
}

Value StepBuilder::residual(int i, WeightRole postNorm, Location l, Value hidden, Value out) {
  if (config.post_block_norms) {
    Value w = weight(postNorm, i, {config.hidden_size});
    if (failed)
      return {};
    out = b.create<llm::RMSNormOp>(l, out, w, b.getF64FloatAttr(config.rms_norm_eps));
  }
  return b.create<llm::AddOp>(l, hidden, out);
}

Value StepBuilder::moe(int i, Value hidden) {
  const ModelConfig &c = config;
  Location l = loc("layers." + std::to_string(i) + ".moe");
  const int64_t E = c.num_experts, I = c.moe_intermediate_size, H = c.hidden_size;
  Value normWeight = weight(WeightRole::kMlpNorm, i, {H});
  Value router = weight(WeightRole::kRouter, i, {E, H});
  Value gate = weight(WeightRole::kGateExperts, i, {E * I, H});
  Value up = weight(WeightRole::kUpExperts, i, {E * I, H});
  Value down = weight(WeightRole::kDownExperts, i, {E * H, I});
  if (failed)
    return {};
  Value norm =
      b.create<llm::RMSNormOp>(l, hidden, normWeight, b.getF64FloatAttr(c.rms_norm_eps));
  Value out = b.create<llm::MoEOp>(l, norm.getType(), norm, router, gate, up, down,
                                   b.getI64IntegerAttr(E),
                                   b.getI64IntegerAttr(c.num_experts_per_tok),
                                   c.norm_topk_prob ? b.getUnitAttr() : UnitAttr());
  return residual(i, WeightRole::kPostMlpNorm, l, hidden, out);
}

Value StepBuilder::mlp(int i, Value hidden) {
  const ModelConfig &c = config;
  if (c.moe())
    return moe(i, hidden);
  Location l = loc("layers." + std::to_string(i) + ".mlp");
  Value normWeight = weight(WeightRole::kMlpNorm, i, {c.hidden_size});
  Value wg = weight(WeightRole::kGate, i, {c.intermediate_size, c.hidden_size});
  Value wu = weight(WeightRole::kUp, i, {c.intermediate_size, c.hidden_size});
  Value wd = weight(WeightRole::kDown, i, {c.hidden_size, c.intermediate_size});
  if (failed)
    return {};
  Value norm =
      b.create<llm::RMSNormOp>(l, hidden, normWeight, b.getF64FloatAttr(c.rms_norm_eps));
  auto inner = activation(c.intermediate_size);
  Value gate = b.create<llm::LinearOp>(l, inner, norm, wg, Value());
  Value up = b.create<llm::LinearOp>(l, inner, norm, wu, Value());
  Value act;
  if (c.activation == Activation::kSiLU)
    act = b.create<llm::SiLUOp>(l, gate);
  else
    act = b.create<llm::GELUOp>(
        l, gate,
        llm::GeluApproxAttr::get(&ctx, c.activation == Activation::kGeluTanh ? llm::GeluApprox::tanh
                                                                             : llm::GeluApprox::erf));
  Value prod = b.create<llm::MulOp>(l, act, up);
  Value down = b.create<llm::LinearOp>(l, activation(c.hidden_size), prod, wd, Value());
  return residual(i, WeightRole::kPostMlpNorm, l, hidden, down);
}

Value StepBuilder::layer(int i, Value hidden) {
  Value h = attention(i, hidden);
  return failed ? Value() : mlp(i, h);
}

DictionaryAttr StepBuilder::configAttr() {
  const ModelConfig &c = config;
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr("architecture", b.getStringAttr(c.architecture)),
      b.getNamedAttr("vocab_size", b.getI64IntegerAttr(c.vocab_size)),
      b.getNamedAttr("hidden_size", b.getI64IntegerAttr(c.hidden_size)),
      b.getNamedAttr("intermediate_size", b.getI64IntegerAttr(c.intermediate_size)),
      b.getNamedAttr("num_layers", b.getI64IntegerAttr(c.num_layers)),
      b.getNamedAttr("num_heads", b.getI64IntegerAttr(c.num_heads)),
      b.getNamedAttr("num_kv_heads", b.getI64IntegerAttr(c.num_kv_heads)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(c.head_dim)),
      b.getNamedAttr("max_position", b.getI64IntegerAttr(c.max_position)),
      b.getNamedAttr("tie_word_embeddings", b.getBoolAttr(c.tie_word_embeddings)),
  };
  if (c.qk_norm)
    attrs.push_back(b.getNamedAttr("qk_norm", b.getBoolAttr(true)));
  if (c.moe()) {
    attrs.push_back(b.getNamedAttr("num_experts", b.getI64IntegerAttr(c.num_experts)));
    attrs.push_back(
        b.getNamedAttr("num_experts_per_tok", b.getI64IntegerAttr(c.num_experts_per_tok)));
  }
  return b.getDictionaryAttr(attrs);
}

OwningOpRef<ModuleOp> StepBuilder::build() {
  if (absl::Status st = ValidateModelConfig(config); !st.ok()) {
    emitError(UnknownLoc::get(&ctx)) << std::string(st.message());
    return {};
  }
  const ModelConfig &c = config;
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc("model"));
  (*module)->setAttr("llm.config", configAttr());
  b.setInsertionPointToEnd(module->getBody());

  auto vec = RankedTensorType::get({ShapedType::kDynamic}, b.getI32Type());
  auto mat = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, b.getI32Type());
  SmallVector<Type> inputs = {vec, vec, vec, vec, mat, vec, vec};
  auto cacheType = llm::KVCacheType::get(&ctx, c.num_kv_heads, c.head_dim, actType);
  inputs.append(c.num_layers, cacheType);
  auto logitsType = RankedTensorType::get({ShapedType::kDynamic, c.vocab_size}, b.getF32Type());
  auto fn = b.create<func::FuncOp>(loc("step"), "step", b.getFunctionType(inputs, logitsType));

  // Readable argument names in dumps.
  static const char *const kArgNames[] = {"tokens",       "positions",    "query_starts",
                                          "context_lens", "block_tables", "slot_mapping",
                                          "logits_rows"};
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  for (unsigned i = 0; i < inputs.size(); ++i) {
    std::string name = i < std::size(kArgNames) ? kArgNames[i] : "cache" + std::to_string(i - 7);
    fn.setArgAttr(i, "llm.name", b.getStringAttr(name));
  }
  Value tokens = entry->getArgument(0);
  positions = entry->getArgument(1);
  queryStarts = entry->getArgument(2);
  contextLens = entry->getArgument(3);
  blockTables = entry->getArgument(4);
  slotMapping = entry->getArgument(5);
  Value logitsRows = entry->getArgument(6);
  for (int64_t i = 0; i < c.num_layers; ++i)
    caches.push_back(entry->getArgument(7 + i));

  Value table = weight(WeightRole::kTokenEmbedding, -1, {c.vocab_size, c.hidden_size});
  if (failed)
    return {};
  Value hidden = b.create<llm::EmbedOp>(
      loc("embed"), activation(c.hidden_size), tokens, table,
      c.embedding_scale != 1.0 ? b.getF64FloatAttr(c.embedding_scale) : FloatAttr());
  for (int64_t i = 0; i < c.num_layers && !failed; ++i)
    hidden = layer(int(i), hidden);
  if (failed)
    return {};
  Value finalNormWeight = weight(WeightRole::kFinalNorm, -1, {c.hidden_size});
  Value head = c.tie_word_embeddings ? table
                                     : weight(WeightRole::kLMHead, -1, {c.vocab_size, c.hidden_size});
  if (failed)
    return {};
  Value finalNorm = b.create<llm::RMSNormOp>(loc("final_norm"), hidden, finalNormWeight,
                                             b.getF64FloatAttr(c.rms_norm_eps));
  Value logits = b.create<llm::LMHeadOp>(
      loc("lm_head"), logitsType, finalNorm, logitsRows, head,
      c.final_logit_softcap > 0 ? b.getF64FloatAttr(c.final_logit_softcap) : FloatAttr());
  b.create<func::ReturnOp>(loc("step"), logits);

  if (mlir::failed(mlir::verify(*module)))
    return {};
  return module;
}

} // namespace

OwningOpRef<ModuleOp> buildStepModule(MLIRContext &context, const ModelConfig &config,
                                      const WeightCatalog &catalog,
                                      const StepBuildOptions &options) {
  context.getOrLoadDialect<llm::LLMDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  Builder b(&context);
  Type act = options.activations == StepBuildOptions::DType::kF32   ? Type(b.getF32Type())
             : options.activations == StepBuildOptions::DType::kF16 ? Type(b.getF16Type())
                                                                    : Type(b.getBF16Type());
  return StepBuilder(context, config, catalog, act).build();
}

} // namespace llmc

// Which ONNX ops Cleave imports, and the translator of each.
#include <map>
#include <utility>

#include "frontend/importer.h"

namespace cleave {

/** LSTM, unrolled per timestep (translate_rnn.cpp). */
void translate_lstm(Importer &, const NodeCtx &);
void translate_gru(Importer &, const NodeCtx &);
void translate_rnn(Importer &, const NodeCtx &);

Translator find_translator(const std::string &domain, const std::string &op_type) {
  static const std::map<std::pair<std::string, std::string>, Translator> kTable = [] {
    std::map<std::pair<std::string, std::string>, Translator> t;
    for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Neg", "Exp", "Log", "Erf", "Relu", "Sigmoid",
                           "Tanh", "Identity", "Reciprocal", "Where", "Equal", "Less", "Greater", "LessOrEqual",
                           "GreaterOrEqual", "Not", "And", "Or", "Xor", "Max", "Min", "Sin", "Cos", "Tan", "Asin",
                           "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"})
      t[{"", op}] = translate_elementwise;
    for (const char *op : {"HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu", "Celu", "PRelu", "Softplus",
                           "Softsign", "ThresholdedRelu", "Abs", "Sign", "Floor", "Ceil", "Round"})
      t[{"", op}] = translate_activation;
    t[{"", "Clip"}] = translate_clip;
    t[{"", "Gelu"}] = translate_gelu;
    t[{"", "Sum"}] = t[{"", "Mean"}] = translate_sum_mean;
    t[{"", "MatMul"}] = t[{"", "Gemm"}] = translate_matmul;
    t[{"", "Softmax"}] = t[{"", "LogSoftmax"}] = translate_softmax;
    t[{"", "SoftmaxCrossEntropyLoss"}] = t[{"", "NegativeLogLikelihoodLoss"}] = translate_loss;
    for (const char *op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) t[{"", op}] = translate_reshape;
    t[{"", "Transpose"}] = translate_transpose;
    t[{"", "Concat"}] = translate_concat;
    t[{"", "Split"}] = translate_split;
    t[{"", "Slice"}] = translate_slice;
    t[{"", "Gather"}] = translate_gather;
    t[{"", "Expand"}] = translate_expand;
    t[{"", "Constant"}] = t[{"", "ConstantOfShape"}] = translate_constant;
    t[{"", "Shape"}] = t[{"", "Size"}] = translate_shape;
    t[{"", "Range"}] = translate_range;
    t[{"", "Trilu"}] = translate_trilu;
    t[{"", "ScatterND"}] = translate_scatter_nd;
    t[{"", "ReduceProd"}] = translate_reduce_prod;
    t[{"", "If"}] = translate_if;
    t[{"", "Loop"}] = translate_loop;
    t[{"", "Cast"}] = t[{"", "CastLike"}] = translate_cast;
    t[{"", "Pad"}] = translate_pad;
    t[{"", "Conv"}] = translate_conv;
    t[{"", "ConvTranspose"}] = translate_conv_transpose;
    t[{"", "InstanceNormalization"}] = translate_instance_norm;
    t[{"", "Resize"}] = translate_resize;
    for (const char *op : {"ReduceSumSquare", "ReduceL2", "ReduceL1", "ReduceLogSum", "ReduceLogSumExp"})
      t[{"", op}] = translate_reduce_composite;
    t[{"", "LpNormalization"}] = translate_lp_normalization;
    t[{"", "Tile"}] = translate_tile;
    t[{"", "Einsum"}] = translate_einsum;
    t[{"", "GlobalMaxPool"}] = translate_global_max_pool;
    t[{"", "IsNaN"}] = t[{"", "IsInf"}] = translate_isnan_isinf;
    t[{"", "Shrink"}] = translate_shrink;
    t[{"", "Hardmax"}] = translate_hardmax;
    t[{"", "EyeLike"}] = translate_eye_like;
    t[{"", "MaxUnpool"}] = translate_max_unpool;
    t[{"", "Det"}] = translate_det;
    t[{"", "GridSample"}] = translate_grid_sample;
    t[{"", "LRN"}] = translate_lrn;
    t[{"", "DepthToSpace"}] = t[{"", "SpaceToDepth"}] = translate_depth_space;
    t[{"", "ArgMax"}] = t[{"", "ArgMin"}] = translate_arg_extreme;
    t[{"", "TopK"}] = translate_topk;
    t[{"", "CumSum"}] = translate_cumsum;
    t[{"", "Mod"}] = translate_mod;
    t[{"", "OneHot"}] = translate_onehot;
    t[{"", "GatherElements"}] = translate_gather_elements;
    t[{"", "ScatterElements"}] = translate_scatter_elements;
    t[{"", "GatherND"}] = translate_gather_nd;
    t[{"", "MaxPool"}] = t[{"", "AveragePool"}] = t[{"", "GlobalAveragePool"}] = translate_pool;
    for (const char *op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) t[{"", op}] = translate_reduce;
    t[{"", "LayerNormalization"}] = translate_layer_norm;
    t[{"", "BatchNormalization"}] = translate_batchnorm;
    t[{"", "Dropout"}] = translate_dropout;
    for (const char *r : {"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike"})
      t[{"", r}] = translate_random;
    t[{"", "LSTM"}] = translate_lstm;
    t[{"", "GRU"}] = translate_gru;
    t[{"", "RNN"}] = translate_rnn;
    const std::string training = "ai.onnx.preview.training";
    t[{training, "Momentum"}] = t[{training, "Adam"}] = t[{training, "Adagrad"}] = translate_optimizer;
    t[{training, "Gradient"}] = translate_gradient;
    return t;
  }();
  auto it = kTable.find({domain == "ai.onnx" ? "" : domain, op_type});
  return it == kTable.end() ? nullptr : it->second;
}

}  // namespace cleave

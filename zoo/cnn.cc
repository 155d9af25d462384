// Inception-V3 and ResNet-50 in the layout of torchvision's definitions
// (convolution, batch normalization and ReLU as separate ops).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "zoo/onnx_builder.h"
#include "zoo/zoo.h"

namespace placer::zoo {
namespace {

struct Act {
  std::string name;
  int64_t channels;
  int64_t height;
  int64_t width;
};

class CnnBuilder {
 public:
  CnnBuilder(OnnxBuilder& b) : b_(b) {}

  // Conv (no bias) + BatchNormalization (+ ReLU).
  Act ConvBn(const std::string& p, const Act& x, int64_t cout, int64_t kh,
             int64_t kw, int64_t stride, int64_t ph, int64_t pw,
             bool relu = true) {
    std::string w = b_.Weight(p + ".weight", {cout, x.channels, kh, kw},
                              x.channels * kh * kw);
    std::string y = b_.Node("Conv", p + "/Conv", {x.name, w},
                            {IntsAttr("kernel_shape", {kh, kw}),
                             IntsAttr("strides", {stride, stride}),
                             IntsAttr("pads", {ph, pw, ph, pw})});
    std::string gamma = b_.Weight(p + ".bn.weight", {cout}, 0, 1.0f);
    std::string beta = b_.Weight(p + ".bn.bias", {cout}, 0, 0.0f);
    std::string mean = b_.Weight(p + ".bn.running_mean", {cout}, 0, 0.0f);
    std::string var = b_.Weight(p + ".bn.running_var", {cout}, 0, 1.0f);
    // Training mode, as PyTorch exports model.train() at opset 17: batch
    // statistics, and the running mean and variance updated (outputs 1, 2).
    y = b_.NodeN("BatchNormalization", p + "/BatchNormalization",
                 {y, gamma, beta, mean, var}, 3,
                 {FloatAttr("epsilon", 1e-3f), FloatAttr("momentum", 0.9f),
                  IntAttr("training_mode", 1)})
            .front();
    if (relu) y = b_.Node("Relu", p + "/Relu", {y});
    int64_t h = (x.height + 2 * ph - kh) / stride + 1;
    int64_t wd = (x.width + 2 * pw - kw) / stride + 1;
    return {y, cout, h, wd};
  }

  Act Conv(const std::string& p, const Act& x, int64_t cout, int64_t k,
           int64_t stride = 1, int64_t pad = 0) {
    return ConvBn(p, x, cout, k, k, stride, pad, pad);
  }

  Act Pool(const std::string& op, const std::string& p, const Act& x,
           int64_t k, int64_t stride, int64_t pad) {
    std::string y = b_.Node(op, p, {x.name},
                            {IntsAttr("kernel_shape", {k, k}),
                             IntsAttr("strides", {stride, stride}),
                             IntsAttr("pads", {pad, pad, pad, pad})});
    return {y, x.channels, (x.height + 2 * pad - k) / stride + 1,
            (x.width + 2 * pad - k) / stride + 1};
  }

  Act Concat(const std::string& p, const std::vector<Act>& xs) {
    std::vector<std::string> names;
    int64_t c = 0;
    for (const Act& x : xs) {
      names.push_back(x.name);
      c += x.channels;
    }
    return {b_.Node("Concat", p, names, {IntAttr("axis", 1)}), c,
            xs[0].height, xs[0].width};
  }

  // Global pooling, flatten, the classifier and the loss.
  void Head(const Act& x, int64_t classes, int64_t batch) {
    std::string y = b_.Node("GlobalAveragePool", "avgpool", {x.name});
    y = b_.Node("Flatten", "flatten", {y}, {IntAttr("axis", 1)});
    std::string w = b_.Weight("fc.weight", {classes, x.channels}, x.channels);
    std::string bias = b_.Weight("fc.bias", {classes}, x.channels);
    y = b_.Node("Gemm", "fc/Gemm", {y, w, bias}, {IntAttr("transB", 1)});
    std::string labels = b_.IntInput("labels", {batch});
    std::string loss = b_.Node("SoftmaxCrossEntropyLoss", "loss", {y, labels});
    b_.Output(loss, onnx::TensorProto::FLOAT, {});
  }

  OnnxBuilder& b() { return b_; }

 private:
  OnnxBuilder& b_;
};

Act InceptionA(CnnBuilder& c, const std::string& p, const Act& x,
               int64_t pool_features) {
  Act b1 = c.Conv(p + ".branch1x1", x, 64, 1);
  Act b5 = c.Conv(p + ".branch5x5_1", x, 48, 1);
  b5 = c.Conv(p + ".branch5x5_2", b5, 64, 5, 1, 2);
  Act b3 = c.Conv(p + ".branch3x3dbl_1", x, 64, 1);
  b3 = c.Conv(p + ".branch3x3dbl_2", b3, 96, 3, 1, 1);
  b3 = c.Conv(p + ".branch3x3dbl_3", b3, 96, 3, 1, 1);
  Act bp = c.Pool("AveragePool", p + ".branch_pool/AveragePool", x, 3, 1, 1);
  bp = c.Conv(p + ".branch_pool", bp, pool_features, 1);
  return c.Concat(p + "/Concat", {b1, b5, b3, bp});
}

Act InceptionB(CnnBuilder& c, const std::string& p, const Act& x) {
  Act b3 = c.Conv(p + ".branch3x3", x, 384, 3, 2);
  Act bd = c.Conv(p + ".branch3x3dbl_1", x, 64, 1);
  bd = c.Conv(p + ".branch3x3dbl_2", bd, 96, 3, 1, 1);
  bd = c.Conv(p + ".branch3x3dbl_3", bd, 96, 3, 2);
  Act bp = c.Pool("MaxPool", p + ".branch_pool/MaxPool", x, 3, 2, 0);
  return c.Concat(p + "/Concat", {b3, bd, bp});
}

Act InceptionC(CnnBuilder& c, const std::string& p, const Act& x,
               int64_t c7) {
  Act b1 = c.Conv(p + ".branch1x1", x, 192, 1);
  Act b7 = c.Conv(p + ".branch7x7_1", x, c7, 1);
  b7 = c.ConvBn(p + ".branch7x7_2", b7, c7, 1, 7, 1, 0, 3);
  b7 = c.ConvBn(p + ".branch7x7_3", b7, 192, 7, 1, 1, 3, 0);
  Act bd = c.Conv(p + ".branch7x7dbl_1", x, c7, 1);
  bd = c.ConvBn(p + ".branch7x7dbl_2", bd, c7, 7, 1, 1, 3, 0);
  bd = c.ConvBn(p + ".branch7x7dbl_3", bd, c7, 1, 7, 1, 0, 3);
  bd = c.ConvBn(p + ".branch7x7dbl_4", bd, c7, 7, 1, 1, 3, 0);
  bd = c.ConvBn(p + ".branch7x7dbl_5", bd, 192, 1, 7, 1, 0, 3);
  Act bp = c.Pool("AveragePool", p + ".branch_pool/AveragePool", x, 3, 1, 1);
  bp = c.Conv(p + ".branch_pool", bp, 192, 1);
  return c.Concat(p + "/Concat", {b1, b7, bd, bp});
}

Act InceptionD(CnnBuilder& c, const std::string& p, const Act& x) {
  Act b3 = c.Conv(p + ".branch3x3_1", x, 192, 1);
  b3 = c.Conv(p + ".branch3x3_2", b3, 320, 3, 2);
  Act b7 = c.Conv(p + ".branch7x7x3_1", x, 192, 1);
  b7 = c.ConvBn(p + ".branch7x7x3_2", b7, 192, 1, 7, 1, 0, 3);
  b7 = c.ConvBn(p + ".branch7x7x3_3", b7, 192, 7, 1, 1, 3, 0);
  b7 = c.Conv(p + ".branch7x7x3_4", b7, 192, 3, 2);
  Act bp = c.Pool("MaxPool", p + ".branch_pool/MaxPool", x, 3, 2, 0);
  return c.Concat(p + "/Concat", {b3, b7, bp});
}

Act InceptionE(CnnBuilder& c, const std::string& p, const Act& x) {
  Act b1 = c.Conv(p + ".branch1x1", x, 320, 1);
  Act b3 = c.Conv(p + ".branch3x3_1", x, 384, 1);
  Act b3a = c.ConvBn(p + ".branch3x3_2a", b3, 384, 1, 3, 1, 0, 1);
  Act b3b = c.ConvBn(p + ".branch3x3_2b", b3, 384, 3, 1, 1, 1, 0);
  Act b3c = c.Concat(p + ".branch3x3/Concat", {b3a, b3b});
  Act bd = c.Conv(p + ".branch3x3dbl_1", x, 448, 1);
  bd = c.Conv(p + ".branch3x3dbl_2", bd, 384, 3, 1, 1);
  Act bda = c.ConvBn(p + ".branch3x3dbl_3a", bd, 384, 1, 3, 1, 0, 1);
  Act bdb = c.ConvBn(p + ".branch3x3dbl_3b", bd, 384, 3, 1, 1, 1, 0);
  Act bdc = c.Concat(p + ".branch3x3dbl/Concat", {bda, bdb});
  Act bp = c.Pool("AveragePool", p + ".branch_pool/AveragePool", x, 3, 1, 1);
  bp = c.Conv(p + ".branch_pool", bp, 192, 1);
  return c.Concat(p + "/Concat", {b1, b3c, bdc, bp});
}

}  // namespace

onnx::ModelProto BuildInceptionV3(const ZooParams& p) {
  OnnxBuilder b("inception_v3", p.seed, p.weights);
  CnnBuilder c(b);
  int64_t s = p.image_size;
  Act x{b.Input("images", {p.batch_size, 3, s, s}), 3, s, s};
  x = c.Conv("Conv2d_1a_3x3", x, 32, 3, 2);
  x = c.Conv("Conv2d_2a_3x3", x, 32, 3);
  x = c.Conv("Conv2d_2b_3x3", x, 64, 3, 1, 1);
  x = c.Pool("MaxPool", "maxpool1", x, 3, 2, 0);
  x = c.Conv("Conv2d_3b_1x1", x, 80, 1);
  x = c.Conv("Conv2d_4a_3x3", x, 192, 3);
  x = c.Pool("MaxPool", "maxpool2", x, 3, 2, 0);
  x = InceptionA(c, "Mixed_5b", x, 32);
  x = InceptionA(c, "Mixed_5c", x, 64);
  x = InceptionA(c, "Mixed_5d", x, 64);
  x = InceptionB(c, "Mixed_6a", x);
  x = InceptionC(c, "Mixed_6b", x, 128);
  x = InceptionC(c, "Mixed_6c", x, 160);
  x = InceptionC(c, "Mixed_6d", x, 160);
  x = InceptionC(c, "Mixed_6e", x, 192);
  x = InceptionD(c, "Mixed_7a", x);
  x = InceptionE(c, "Mixed_7b", x);
  x = InceptionE(c, "Mixed_7c", x);
  c.Head(x, 1000, p.batch_size);
  return b.Finish();
}

onnx::ModelProto BuildResNet50(const ZooParams& p) {
  OnnxBuilder b("resnet50", p.seed, p.weights);
  CnnBuilder c(b);
  int64_t s = p.image_size;
  Act x{b.Input("images", {p.batch_size, 3, s, s}), 3, s, s};
  x = c.Conv("conv1", x, 64, 7, 2, 3);
  x = c.Pool("MaxPool", "maxpool", x, 3, 2, 1);
  const int64_t blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    int64_t width = 64 << stage;
    for (int64_t i = 0; i < blocks[stage]; ++i) {
      std::string pre = absl::StrCat("layer", stage + 1, ".", i);
      int64_t stride = (i == 0 && stage > 0) ? 2 : 1;
      Act identity = x;
      Act y = c.Conv(pre + ".conv1", x, width, 1);
      y = c.Conv(pre + ".conv2", y, width, 3, stride, 1);
      y = c.ConvBn(pre + ".conv3", y, width * 4, 1, 1, 1, 0, 0, false);
      if (i == 0) {
        identity = c.ConvBn(pre + ".downsample", x, width * 4, 1, 1, stride,
                            0, 0, false);
      }
      std::string sum = b.Node("Add", pre + "/Add", {y.name, identity.name});
      x = {b.Node("Relu", pre + "/Relu", {sum}), y.channels, y.height,
           y.width};
    }
  }
  c.Head(x, 1000, p.batch_size);
  return b.Finish();
}

}  // namespace placer::zoo

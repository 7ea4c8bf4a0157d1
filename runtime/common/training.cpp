// rt::TrainingRun (rt.h): a rank program's flags, resume, checkpoints, the learning-rate schedule and progress. The
// same on every backend: buffers move through rt::checkpoint_save/load, which stage device memory themselves.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <type_traits>

#include "cleave/rt.h"
#include "common/checkpoint_format.h"
#include "common/host_io.h"
#include "common/npy_format.h"
#include "common/process.h"
#include "common/run_status.h"

namespace cleave::rt {

namespace detail {
bool g_skip_updates = false;
int64_t g_skipped_updates = 0;

bool skipped_update(int64_t n, std::initializer_list<std::pair<const real *, real *>> kept) {
  if (!g_skip_updates) return false;
  for (const auto &[in, out] : kept)
    if (in != out) copy(out, in, n * static_cast<int64_t>(sizeof(real)));
  return true;
}
}  // namespace detail

namespace {
namespace fs = std::filesystem;

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int) { g_stop_signal = 1; }

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t parse_count(const std::string &flag, const char *text, int64_t min) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min)
    fail(flag + ": expected an integer >= " + std::to_string(min) + ", got \"" + text + "\"");
  return v;
}

double parse_number(const std::string &flag, const char *text) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(v))
    fail(flag + ": expected a number, got \"" + text + "\"");
  return v;
}

/** Writes `text` to `path` durably (host::DurableFile). */
void write_durably(const fs::path &path, const std::string &text) {
  host::DurableFile file(path.string());
  file.put(text.data(), text.size());
  file.commit();
}

/** ckpt's functions, their errors fail()ing this rank. */
template <typename F>
auto checked(F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const ckpt::Error &e) {
    fail(e.what());
  }
}

std::string format_seconds(double s) {
  char buf[32];
  long long t = static_cast<long long>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, t / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  return buf;
}

}  // namespace

TrainingRun::TrainingRun(int argc, char **argv, int64_t batch) : batch_(batch) {
  if (const char *graphs = std::getenv("CLEAVE_CUDA_GRAPHS")) {
    std::string v = graphs;
    if (v != "0" && v != "1" && v != "on" && v != "off")
      fail("CLEAVE_CUDA_GRAPHS=" + v + ": expected 0, 1, on or off");
    cuda_graphs_ = v == "1" || v == "on";
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    auto value = [&]() -> const char * {
      if (!has_value) fail(a + ": needs a value");
      return argv[++i];
    };
    if (a == "--steps") last_step_ = parse_count(a, value(), 1);
    else if (a == "--weights") weights_ = value();
    else if (a == "--save") save_ = value();
    else if (a == "--checkpoint-dir") checkpoint_dir_ = value();
    else if (a == "--checkpoint-every") checkpoint_every_ = parse_count(a, value(), 1);
    else if (a == "--keep") keep_ = parse_count(a, value(), 0);
    else if (a == "--resume") resume_ = value();
    else if (a == "--log-json") log_json_ = value();
    else if (a == "--cuda-graphs") {
      std::string v = value();
      if (v != "on" && v != "off") fail("--cuda-graphs: expected on or off, got \"" + v + "\"");
      cuda_graphs_ = v == "on";
    }
    else if (a == "--accumulate") accumulate_ = parse_count(a, value(), 1);
    else if (a == "--epochs") epochs_ = parse_count(a, value(), 1);
    else if (a == "--shuffle") order_ = sched::SampleOrder(true, static_cast<uint64_t>(parse_count(a, value(), 0)));
    else if (a == "--clip-grad-norm") {
      clip_norm_ = parse_number(a, value());
      if (clip_norm_ <= 0) fail("--clip-grad-norm: must be positive, got " + std::string(argv[i]));
    }
    else if (a == "--lr-schedule") schedule_.kind = value();
    else if (a == "--warmup-steps") schedule_.warmup = parse_count(a, value(), 0);
    else if (a == "--min-lr") schedule_.min_lr = parse_number(a, value());
    else if (a == "--step-size") schedule_.step_size = parse_count(a, value(), 1);
    else if (a == "--gamma") schedule_.gamma = parse_number(a, value());
    else if (a == "--milestones") {
      std::string list = value();
      for (size_t at = 0; at <= list.size();) {
        size_t comma = std::min(list.find(',', at), list.size());
        schedule_.milestones.push_back(parse_count(a, list.substr(at, comma - at).c_str(), 1));
        at = comma + 1;
      }
    } else if (a == "--val-data") {
      std::string list = value();
      for (size_t at = 0; at < list.size();) {
        size_t comma = std::min(list.find(',', at), list.size());
        std::string item = list.substr(at, comma - at);
        size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
          fail("--val-data: expected NAME=FILE.npy, got \"" + item + "\"");
        val_data_.emplace_back(item.substr(0, eq), item.substr(eq + 1));
        at = comma + 1;
      }
    } else if (a == "--val-every") {
      val_every_ = parse_count(a, value(), 1);
    } else if (a.find('=') != std::string::npos && a[0] != '-') {
      data_.emplace_back(a.substr(0, a.find('=')), a.substr(a.find('=') + 1));
    } else {
      fail("unknown argument \"" + a + "\"");
    }
  }
  if (resume_ == "auto" && checkpoint_dir_.empty()) fail("--resume auto: needs --checkpoint-dir");
  if (val_every_ > 0 && val_data_.empty()) fail("--val-every: needs --val-data");
  bool steps_given = false;
  for (int i = 1; i < argc; ++i) steps_given |= std::string(argv[i]) == "--steps";
  if (epochs_ > 0 && steps_given) fail("--epochs: give --steps or --epochs, not both");
  schedule_.total = last_step_;  // data() sets it again for --epochs
  if (std::string why = schedule_.problem(); !why.empty() && epochs_ == 0) fail(why);
  if (!checkpoint_dir_.empty()) {
    std::error_code ec;
    fs::create_directories(checkpoint_dir_, ec);
    if (!fs::is_directory(checkpoint_dir_)) fail("--checkpoint-dir " + checkpoint_dir_ + ": cannot create it");
    std::signal(SIGUSR1, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
  }
}

void TrainingRun::load(std::vector<NamedBuffer> state) {
  state_ = std::move(state);
  const Context &c = context();
  std::string from = resume_ == "auto" ? checkpoint_dir_ : resume_;
  std::optional<std::string> checkpoint;
  if (!from.empty()) {
    checkpoint = checked([&] { return ckpt::find_checkpoint(from); });
    if (!checkpoint && resume_ != "auto")
      fail("--resume " + from + ": no complete checkpoint there (step-<k>/manifest.json)");
  }
  if (!checkpoint) {
    if (weights_.empty()) fail("--weights FILE is required");
    checkpoint_load(weights_, state_);
  } else {
    fs::path dir = *checkpoint;
    ckpt::Manifest m = checked([&] {
      return ckpt::parse_manifest(ckpt::read_file((dir / "manifest.json").string()), (dir / "manifest.json").string());
    });
    if (m.ranks != c.world)
      fail("--resume " + dir.string() + ": a checkpoint of " + std::to_string(m.ranks) + " ranks, this run has " +
           std::to_string(c.world) + " (`cleave run --resume` reshards it)");
    checkpoint_load((dir / ("rank_" + std::to_string(c.rank) + ".bin")).string(), state_);
    if (m.scaler) {  // scale_losses takes them
      resumed_scale_ = m.scaler->scale;
      resumed_tracker_ = m.scaler->growth_tracker;
      detail::g_skipped_updates = m.scaler->skipped_steps;
    }
    first_step_ = m.step + 1;
    last_checkpoint_ = m.step;
    log_info("resumed from " + dir.string() + " after step " + std::to_string(m.step));
  }
  if (!log_json_.empty() && c.rank == 0) {
    // A resumed run continues the log; the lines of steps after the checkpoint (a run that went further before it
    // stopped) are the resumed run's to write again, so they are dropped.
    std::string kept;
    if (first_step_ > 1) {
      std::string old;
      try {
        old = ckpt::read_file(log_json_);
      } catch (const ckpt::Error &) {  // no log yet
      }
      for (size_t at = 0; at < old.size();) {
        size_t nl = old.find('\n', at);
        std::string line = old.substr(at, nl == std::string::npos ? std::string::npos : nl - at + 1);
        long long step = -1;  // every line starts {"step": k, (end_step, end_validation)
        if (std::sscanf(line.c_str(), "{\"step\": %lld", &step) == 1 && step >= 0 && step < first_step_) kept += line;
        at = nl == std::string::npos ? old.size() : nl + 1;
      }
    }
    std::FILE *f = std::fopen(log_json_.c_str(), "wb");
    if (!f || std::fwrite(kept.data(), 1, kept.size(), f) != kept.size() || std::fclose(f) != 0)
      fail("--log-json " + log_json_ + ": cannot write it");
  }
  host::status_first_step(first_step_);
  started_ = now_seconds();
  last_progress_ = started_;
}

NpyFile TrainingRun::data(const std::string &name, int64_t outer) {
  for (const auto &[n, p] : data_) {
    if (n != name) continue;
    NpyFile f = npy_open(p);
    f.outer = outer;
    int64_t count = f.shape.empty() ? 0 : f.shape[0];
    if (samples_ > 0 && count != samples_)
      fail(p + ": " + std::to_string(count) + " samples, another input has " + std::to_string(samples_));
    samples_ = count;
    if (epochs_ > 0) {
      schedule_.total = last_step_ = std::max<int64_t>(1, epochs_ * samples_ / (batch_ * accumulate_));
      if (std::string why = schedule_.problem(); !why.empty()) fail(why);
    }
    return f;
  }
  fail("no data for input " + name + " (give " + name + "=FILE.npy)");
}

bool TrainingRun::validation_due(int64_t step) const {
  return !val_data_.empty() && ((val_every_ > 0 && step % val_every_ == 0) || step == last_step_);
}

NpyFile TrainingRun::val_data(const std::string &name, int64_t outer) {
  for (const auto &[n, p] : val_data_) {
    if (n != name) continue;
    NpyFile f = npy_open(p);
    f.outer = outer;
    int64_t count = f.shape.empty() ? 0 : f.shape[0];
    if (count == 0) fail("--val-data " + p + ": no samples");
    if (val_samples_ > 0 && count != val_samples_)
      fail("--val-data " + p + ": " + std::to_string(count) + " samples, another input has " +
           std::to_string(val_samples_));
    val_samples_ = count;
    return f;
  }
  fail("--val-data: no validation data for input " + name + " (give " + name + "=FILE.npy)");
}

void TrainingRun::read_val_samples(const NpyFile &f, int64_t vb, int64_t first, int64_t count, real *dst) {
  npy_read_samples(f, vb * batch_ + first, count, dst);
}

void TrainingRun::read_val_samples(const NpyFile &f, int64_t vb, int64_t first, int64_t count, int64_t *dst) {
  npy_read_samples(f, vb * batch_ + first, count, dst);
}

void TrainingRun::add_validation(const val::LossKind &kind, int64_t vb, int64_t first, int64_t n, int64_t c,
                                 int64_t d, const real *scores, const int64_t *labels, const real *weights,
                                 bool counted) {
  if (!counted) return;
  std::vector<real> &s = val_scores_, &w = val_weights_;
  std::vector<int64_t> &y = val_labels_;
  s.resize(static_cast<size_t>(n * c * d));
  w.resize(weights ? static_cast<size_t>(c) : 0);
  y.resize(static_cast<size_t>(n * d));
  copy_to_host(s.data(), scores, static_cast<int64_t>(s.size() * sizeof(real)));
  copy_to_host(y.data(), labels, static_cast<int64_t>(y.size() * sizeof(int64_t)));
  if (weights) copy_to_host(w.data(), weights, static_cast<int64_t>(w.size() * sizeof(real)));
  // Samples of the batch past the set's end are its first samples again: counted once, in batch 0.
  int64_t fresh = val_samples_ - (vb * batch_ + first);
  int64_t bad = val::add_classified(val_sums_, kind, n, c, d, s.data(), y.data(), weights ? w.data() : nullptr, fresh);
  if (bad >= 0)
    fail("--val-data: sample " + std::to_string(vb * batch_ + first + bad) + " has a label outside [0, " +
         std::to_string(c) + ")");
}

void TrainingRun::end_validation(int64_t step) {
  double local[4] = {val_sums_.loss, val_sums_.weight, val_sums_.correct, val_sums_.positions}, total[4];
  CLEAVE_MPI(MPI_Allreduce, local, total, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  val_sums_ = {};
  val::Sums all{total[0], total[1], total[2], total[3]};
  if (context().rank != 0) return;
  std::printf("%s\n", val::line(step, all).c_str());
  std::fflush(stdout);
  if (!log_json_.empty())
    if (std::FILE *f = std::fopen(log_json_.c_str(), "ab")) {
      std::fprintf(f, "{\"step\": %lld, \"val_loss\": %.9g, \"val_accuracy\": %.6f}\n", static_cast<long long>(step),
                   all.mean_loss(), all.accuracy());
      std::fclose(f);
    }
}

/** The samples of a shuffled stream, gathered on the host and laid out as the fed tensor wants them (held in
 *  staged_ until the next call). */
template <typename T>
const T *TrainingRun::gather_shuffled(const NpyFile &f, int64_t first, int64_t count) {
  int64_t n = f.shape.empty() ? 0 : f.shape[0];
  if (n <= 0) fail(f.path + ": no samples");
  // Each sample of the permutation is read on the host in file order, then laid out.
  NpyFile one = f;
  one.outer = 1;
  size_t elems = static_cast<size_t>(count * f.sample_elems);
  std::vector<T> *held;
  if constexpr (std::is_same_v<T, real>) held = &staged_real_;
  else held = &staged_i64_;
  std::vector<T> &staged = *held;
  if (staged.size() < 2 * elems) staged.resize(2 * elems);
  for (int64_t i = 0; i < count; ++i)
    host::read_samples(one, order_.sample(first + i, n), 1, staged.data() + i * f.sample_elems);
  if (f.outer == 1) return staged.data();
  rt::npy::to_sample_axis(staged.data(), count, f.outer, f.sample_elems / f.outer, staged.data() + elems);
  return staged.data() + elems;
}

template <typename T>
void TrainingRun::read_shuffled(const NpyFile &f, int64_t first, int64_t count, T *dst) {
  int64_t bytes = count * f.sample_elems * static_cast<int64_t>(sizeof(T));
  if (detail::graph_capturing()) {
    detail::graph_feed(first, bytes, dst, [this, f, count](int64_t at, void *host) {
      read_samples_to_host(f, at, count, static_cast<T *>(host));
    });
    return;
  }
  if (!order_.shuffled()) return npy_read_samples(f, first, count, dst);
  copy_from_host(dst, gather_shuffled<T>(f, first, count), bytes);
}

template <typename T>
void TrainingRun::samples_to_host(const NpyFile &f, int64_t first, int64_t count, T *host) {
  if (!order_.shuffled()) return host::read_samples(f, first, count, host);
  const T *laid = gather_shuffled<T>(f, first, count);
  std::copy(laid, laid + count * f.sample_elems, host);
}

void TrainingRun::read_samples_to_host(const NpyFile &f, int64_t first, int64_t count, real *host) {
  samples_to_host(f, first, count, host);
}

void TrainingRun::read_samples_to_host(const NpyFile &f, int64_t first, int64_t count, int64_t *host) {
  samples_to_host(f, first, count, host);
}

void TrainingRun::read_samples(const NpyFile &f, int64_t first, int64_t count, real *dst) {
  read_shuffled(f, first, count, dst);
}

void TrainingRun::read_samples(const NpyFile &f, int64_t first, int64_t count, int64_t *dst) {
  read_shuffled(f, first, count, dst);
}

void TrainingRun::accumulate(const std::vector<GradShard> &grads, real *loss, int64_t micro) {
  if (accumulate_ == 1) return;
  // sums_ holds every shard's sum, then the loss's: [n_0][n_1]...[1].
  int64_t total = 1;
  for (const GradShard &g : grads) total += g.n;
  if (sums_.size() == 0) sums_ = Arena(static_cast<size_t>(total) * sizeof(real));
  int64_t at = 0;
  // `mean`: leave the mean, else the sum. Under loss scaling each pass's backward was seeded with scale / K
  // (scale_losses): the gradients' sum is their mean times the scale, as with torch's recipe of scaling loss / K.
  auto add = [&](real *x, int64_t n, bool mean) {
    real *sum = sums_.reals(static_cast<size_t>(at) * sizeof(real), static_cast<size_t>(n));
    if (micro == 0) copy(sum, x, n * static_cast<int64_t>(sizeof(real)));
    else add_in_place(sum, x, n);
    if (micro + 1 == accumulate_) {  // the mean, where the updates (and the loss line) read
      copy(x, sum, n * static_cast<int64_t>(sizeof(real)));
      if (mean) scale_in_place(x, n, 1.0f / static_cast<real>(accumulate_));
    }
    at += n;
  };
  for (const GradShard &g : grads) add(g.ptr, g.n, !scaling_);
  if (loss) add(loss, 1, true);
}

real TrainingRun::lr(real base, int64_t step) {
  last_lr_ = schedule_.lr(base, step);
  if (detail::graph_capturing()) detail::graph_note_lr(base, static_cast<real>(last_lr_));
  return static_cast<real>(last_lr_);
}

void TrainingRun::run_step(int64_t step, const std::function<void()> &body) { detail::run_step(*this, step, body); }

std::string TrainingRun::graph_obstacle() const {
  if (!cuda_graphs_) return "--cuda-graphs off";
  if (accumulate_ > 1) return "--accumulate runs different work in each pass";
  if (clip_norm_ > 0) return "--clip-grad-norm reads the gradient norm on the host";
  if (scaling_) return "loss scaling decides on the host whether a step's updates run";
  if (!log_json_.empty()) return "--log-json reads the gradient norm on the host";
  return "";
}

void TrainingRun::scale_losses(real init, int64_t growth_interval, real *scale) {
  if (!(init > 0) || !std::isfinite(init) || growth_interval < 1)
    fail("scale_losses: a first scale of " + std::to_string(init) + " and growth interval " +
         std::to_string(growth_interval));
  scaling_ = true;
  scale_ = resumed_scale_ > 0 ? resumed_scale_ : init;
  scale_tracker_ = resumed_tracker_;
  scale_growth_interval_ = growth_interval;
  scale_buffer_ = scale;
  write_scale();
}

void TrainingRun::write_scale() {
  // The seed of each pass: scale / K under --accumulate K (accumulate() sums the passes' gradients then).
  real s = static_cast<real>(scale_ / static_cast<double>(accumulate_));
  if (scale_buffer_) copy_from_host(scale_buffer_, &s, sizeof s);
}

void TrainingRun::unscale_grads(const std::vector<GradShard> &grads, int64_t step) {
  if (!scaling_) fail("unscale_grads before scale_losses");
  // A sum of squares in double is finite exactly when every float32 element is (|x| < 2^128, so x^2 < 2^256; loss scaling runs in float32 only).
  std::vector<std::pair<const real *, int64_t>> parts;
  for (const GradShard &g : grads) parts.emplace_back(g.ptr, g.n);
  int local = std::isfinite(sum_of_squares(parts)) ? 0 : 1, any = 0;
  CLEAVE_MPI(MPI_Allreduce, &local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  double used = scale_;
  detail::g_skip_updates = any != 0;
  if (any) {  // torch.cuda.amp.GradScaler: backoff factor 0.5, the tracker restarts
    scale_ = static_cast<real>(scale_ * 0.5);
    scale_tracker_ = 0;
    ++detail::g_skipped_updates;
    if (scale_ == 0) fail("step " + std::to_string(step) + ": the loss scale fell to 0: every step overflowed");
  } else {
    real inv = static_cast<real>(1.0 / scale_);  // torch: the reciprocal in double, rounded to real
    for (const GradShard &g : grads) scale_in_place(g.ptr, g.n, inv);
    // (>=: a run resumed with a shorter interval than its checkpoint's run had grows at once.)
    if (++scale_tracker_ >= scale_growth_interval_) {  // growth factor 2, where the result is finite
      if (std::isfinite(static_cast<real>(scale_ * 2))) scale_ = static_cast<real>(scale_ * 2);
      scale_tracker_ = 0;
    }
  }
  host::note_loss_scale(used, any != 0);
  write_scale();
}

void TrainingRun::clip_grads(const std::vector<GradShard> &grads, int64_t step) {
  if (detail::g_skip_updates) {  // loss scaling skips this step: its gradients are not finite
    last_grad_norm_ = std::nan("");
    return;
  }
  if (clip_norm_ <= 0 && log_json_.empty()) return;
  std::vector<std::pair<const real *, int64_t>> counted;
  for (const GradShard &g : grads)
    if (g.counted) counted.emplace_back(g.ptr, g.n);
  double local = sum_of_squares(counted), total = 0;
  CLEAVE_MPI(MPI_Allreduce, &local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  // torch computes the norm and the coefficient in float32.
  real norm = static_cast<real>(std::sqrt(total));
  last_grad_norm_ = norm;
  if (!std::isfinite(norm)) fail("step " + std::to_string(step) + ": the gradient norm is " + std::to_string(norm));
  if (clip_norm_ <= 0) return;
  real coef = std::min<real>(static_cast<real>(clip_norm_) / (norm + static_cast<real>(1e-6)), 1);
  if (coef < 1.0f)
    for (const GradShard &g : grads) scale_in_place(g.ptr, g.n, coef);
}

bool TrainingRun::end_step(int64_t step) {
  const Context &c = context();
  double now = now_seconds();
  if (c.rank == 0) {
    double loss = host::last_loss();
    if (!log_json_.empty()) {
      static double previous = started_;
      if (std::FILE *f = std::fopen(log_json_.c_str(), "ab")) {
        // A skipped step (loss scaling) has no gradient norm: null, and its loss may not be finite either.
        auto number = [](double v, const char *format) {
          char text[40] = "null";
          if (std::isfinite(v)) std::snprintf(text, sizeof text, format, v);
          return std::string(text);
        };
        std::string scaling = scaling_ ? ", \"loss_scale\": " + number(host::noted_loss_scale(), "%.9g") +
                                             (detail::g_skip_updates ? ", \"skipped\": true" : ", \"skipped\": false")
                                       : "";
        std::fprintf(f, "{\"step\": %lld, \"loss\": %s, \"lr\": %.7g, \"grad_norm\": %s%s, \"seconds\": %.6f}\n",
                     static_cast<long long>(step), number(loss, "%.9g").c_str(), last_lr_,
                     number(last_grad_norm_, "%.7g").c_str(), scaling.c_str(), now - previous);
        std::fclose(f);
      }
      previous = now;
    }
    // CLEAVE_PROGRESS: 1 = stderr, tty = the controlling terminal (cleave run sends stderr to its log), 0 = none;
    // unset: stderr when it is a terminal.
    static std::FILE *progress = [] {
      const char *v = std::getenv("CLEAVE_PROGRESS");
      std::string how = v ? v : (::isatty(2) == 1 ? "1" : "0");
      if (how == "1") return stderr;
      if (how == "tty") return std::fopen("/dev/tty", "w");
      return static_cast<std::FILE *>(nullptr);
    }();
    if (progress && (now - last_progress_ >= 1 || step == last_step_)) {
      double done = static_cast<double>(step - first_step_ + 1), elapsed = now - started_;
      std::fprintf(progress, "\rstep %lld/%lld  loss %.5g  %.0f samples/s  ETA %s   ", static_cast<long long>(step),
                   static_cast<long long>(last_step_), loss, done * static_cast<double>(batch_) / elapsed,
                   format_seconds(elapsed / done * static_cast<double>(last_step_ - step)).c_str());
      if (step == last_step_) std::fputc('\n', progress);
      std::fflush(progress);
      last_progress_ = now;
    }
  }
  if (checkpoint_dir_.empty()) return true;
  int stop = g_stop_signal, any = 0;
  CLEAVE_MPI(MPI_Allreduce, &stop, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any || step % checkpoint_every_ == 0 || step == last_step_) write_checkpoint(step);
  if (any) {
    stopped_ = true;
    log_info("stopped by a signal after step " + std::to_string(step) + "; checkpoint in " + checkpoint_dir_);
    return false;
  }
  return true;
}

void TrainingRun::write_checkpoint(int64_t step) {
  const Context &c = context();
  fs::path dir = fs::path(checkpoint_dir_) / ckpt::step_dir_name(step);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) fail("cannot create " + dir.string());
  if (const char *fault = std::getenv("CLEAVE_TEST_KILL_IN_CHECKPOINT")) {
    long long s = -1, r = -1;  // STEP:RANK
    if (std::sscanf(fault, "%lld:%lld", &s, &r) == 2 && s == step && r == c.rank) host::g_kill_during_checkpoint = true;
  }
  checkpoint_save((dir / ("rank_" + std::to_string(c.rank) + ".bin")).string(), state_);
  // The manifest makes the checkpoint complete: rank 0 writes it only once every rank's file is on disk.
  CLEAVE_MPI(MPI_Barrier, MPI_COMM_WORLD);
  if (c.rank != 0) return;
  ckpt::Manifest m{step, c.world, batch_, std::nullopt};
  if (scaling_) m.scaler = ckpt::ScalerState{scale_, scale_tracker_, detail::g_skipped_updates};
  write_durably(dir / "manifest.json", ckpt::manifest_text(m));
  last_checkpoint_ = step;
  // Older checkpoints beyond --keep, and incomplete ones older than this (a crash while writing) go.
  std::map<int64_t, std::string> complete = checked([&] { return ckpt::complete_checkpoints(checkpoint_dir_); });
  int64_t kept = 0;
  for (auto it = complete.rbegin(); it != complete.rend(); ++it)
    if (keep_ > 0 && ++kept > keep_) fs::remove_all(it->second, ec);
  for (fs::directory_iterator it(checkpoint_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("step-", 0) == 0 && name < dir.filename().string() && !fs::exists(it->path() / "manifest.json"))
      fs::remove_all(it->path(), ec);
  }
}

int TrainingRun::finish(const std::vector<NamedBuffer> &saved) {
  if (!save_.empty()) checkpoint_save(save_ + ".rank_" + std::to_string(context().rank) + ".bin", saved);
  finalize();
  return stopped_ ? kStoppedForResume : 0;
}

}  // namespace cleave::rt

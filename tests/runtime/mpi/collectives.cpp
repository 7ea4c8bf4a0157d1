// Every collective and grouped send/recv of the runtime on the world and on ordered sub-groups, checked against a
// serial computation each rank does on its own. Run by CTest under mpirun with 2 and 4 ranks; a mismatch fails the
// job through rt::fail with the collective, group and element.
#include <cstdio>
#include <string>
#include <vector>

#include "cleave/rt.h"

namespace rt = cleave::rt;

namespace {

/** Rank r's i-th element: distinct per rank and exactly representable, so sums are exact. */
float data(int r, int64_t i) { return static_cast<float>((r + 1) * 100) + 0.5f * static_cast<float>(i); }

std::string group_str(const std::vector<int> &g) {
  std::string s = "[";
  for (size_t i = 0; i < g.size(); ++i) s += (i ? "," : "") + std::to_string(g[i]);
  return s + "]";
}

void expect(bool ok, const std::string &what, const std::vector<int> &g, int64_t i, float got, float want) {
  if (!ok) rt::fail(what + " on group " + group_str(g) + ": element " + std::to_string(i) + " is " +
                    std::to_string(got) + ", expected " + std::to_string(want));
}

void check_group(const std::vector<int> &ranks, int me) {
  const rt::Comm &c = rt::group(ranks);
  if (&rt::group(ranks) != &c) rt::fail("group() did not cache " + group_str(ranks));
  int n = c.size(), k = c.index;
  if (ranks[static_cast<size_t>(k)] != me) rt::fail("group index does not match the rank");
  const int64_t count = 5;
  std::vector<float> send(static_cast<size_t>(count * n)), recv(static_cast<size_t>(count * n));
  for (int64_t i = 0; i < count * n; ++i) send[static_cast<size_t>(i)] = data(me, i);

  rt::all_reduce_sum(c, send.data(), recv.data(), count);
  std::vector<float> inplace(send.begin(), send.begin() + count);
  rt::all_reduce_sum(c, inplace.data(), inplace.data(), count);
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r : ranks) want += data(r, i);
    expect(recv[static_cast<size_t>(i)] == want, "all_reduce_sum", ranks, i, recv[static_cast<size_t>(i)], want);
    expect(inplace[static_cast<size_t>(i)] == want, "all_reduce_sum in place", ranks, i, inplace[static_cast<size_t>(i)], want);
  }

  // Started collectives: two in flight at once (started in the same order on every member), a blocking one on the
  // same group issued while they are pending, then waited for in the other order (on every member alike: the cpu
  // backend runs each reduction at its wait, so members must also wait in the same order).
  std::vector<float> first(send.begin(), send.begin() + count), second(send.begin(), send.begin() + count);
  for (float &v : second) v *= 2;
  rt::Pending p1 = rt::all_reduce_sum_start(c, first.data(), count);
  rt::Pending p2 = rt::all_reduce_sum_start(c, second.data(), count);
  std::vector<float> between(send.begin(), send.begin() + count);
  rt::all_reduce_sum(c, between.data(), between.data(), count);
  rt::wait(p2);
  rt::wait(p1);
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r : ranks) want += data(r, i);
    expect(first[static_cast<size_t>(i)] == want, "all_reduce_sum_start", ranks, i, first[static_cast<size_t>(i)], want);
    expect(second[static_cast<size_t>(i)] == 2 * want, "all_reduce_sum_start (second)", ranks, i,
           second[static_cast<size_t>(i)], 2 * want);
    expect(between[static_cast<size_t>(i)] == want, "all_reduce_sum while started ones are pending", ranks, i,
           between[static_cast<size_t>(i)], want);
  }

  rt::all_gather(c, send.data(), recv.data(), count);
  for (int j = 0; j < n; ++j)
    for (int64_t i = 0; i < count; ++i) {
      float got = recv[static_cast<size_t>(j * count + i)], want = data(ranks[static_cast<size_t>(j)], i);
      expect(got == want, "all_gather", ranks, j * count + i, got, want);
    }

  rt::reduce_scatter_sum(c, send.data(), recv.data(), count);
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r : ranks) want += data(r, k * count + i);
    expect(recv[static_cast<size_t>(i)] == want, "reduce_scatter_sum", ranks, i, recv[static_cast<size_t>(i)], want);
  }

  rt::all_to_all(c, send.data(), recv.data(), count);
  for (int j = 0; j < n; ++j)
    for (int64_t i = 0; i < count; ++i) {
      float got = recv[static_cast<size_t>(j * count + i)], want = data(ranks[static_cast<size_t>(j)], k * count + i);
      expect(got == want, "all_to_all", ranks, j * count + i, got, want);
    }

  int root = n - 1;
  std::vector<float> buf(send.begin(), send.begin() + count);
  rt::broadcast(c, buf.data(), count, root);
  for (int64_t i = 0; i < count; ++i) {
    float want = data(ranks[static_cast<size_t>(root)], i);
    expect(buf[static_cast<size_t>(i)] == want, "broadcast", ranks, i, buf[static_cast<size_t>(i)], want);
  }
}

/** A reduce-scatter of blocks longer than the runtime's exchange chunk (1 Mi floats: common/reduce_scatter.h), each
 *  block summed from every member's part. */
void check_long_reduce_scatter(const std::vector<int> &ranks) {
  const rt::Comm &c = rt::group(ranks);
  const int64_t count = (int64_t{1} << 20) + 3;
  auto value = [](int r, int64_t i) { return static_cast<float>((r + 1) * 1000 + i % 997); };
  std::vector<float> send(static_cast<size_t>(count * c.size())), recv(static_cast<size_t>(count));
  for (int64_t i = 0; i < count * c.size(); ++i) send[static_cast<size_t>(i)] = value(ranks[static_cast<size_t>(c.index)], i);
  rt::reduce_scatter_sum(c, send.data(), recv.data(), count);
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r : ranks) want += value(r, c.index * count + i);
    expect(recv[static_cast<size_t>(i)] == want, "long reduce_scatter_sum", ranks, i, recv[static_cast<size_t>(i)], want);
  }
}

/** Grouped send/recv around the ring of `ranks`: two messages to the next member (matched in order) and one to the
 *  previous, all in one batch. */
void check_send_recv(const std::vector<int> &ranks, int me) {
  int n = static_cast<int>(ranks.size()), k = 0;
  while (ranks[static_cast<size_t>(k)] != me) ++k;
  int next = ranks[static_cast<size_t>((k + 1) % n)], prev = ranks[static_cast<size_t>((k + n - 1) % n)];
  std::vector<float> a(3), b(7), back(2), ra(3), rb(7), rback(2);
  for (int i = 0; i < 3; ++i) a[static_cast<size_t>(i)] = data(me, i);
  for (int i = 0; i < 7; ++i) b[static_cast<size_t>(i)] = data(me, 100 + i);
  for (int i = 0; i < 2; ++i) back[static_cast<size_t>(i)] = data(me, 200 + i);
  using T = rt::Transfer;
  rt::send_recv({T{T::recv, prev, ra.data(), 12}, T{T::send, next, a.data(), 12}, T{T::send, next, b.data(), 28},
                 T{T::recv, prev, rb.data(), 28}, T{T::send, prev, back.data(), 8}, T{T::recv, next, rback.data(), 8}});
  for (int i = 0; i < 3; ++i) expect(ra[static_cast<size_t>(i)] == data(prev, i), "send_recv first", ranks, i, ra[static_cast<size_t>(i)], data(prev, i));
  for (int i = 0; i < 7; ++i) expect(rb[static_cast<size_t>(i)] == data(prev, 100 + i), "send_recv second", ranks, i, rb[static_cast<size_t>(i)], data(prev, 100 + i));
  for (int i = 0; i < 2; ++i) expect(rback[static_cast<size_t>(i)] == data(next, 200 + i), "send_recv backward", ranks, i, rback[static_cast<size_t>(i)], data(next, 200 + i));
}

}  // namespace

int main(int argc, char **argv) {
  const rt::Context &ctx = rt::init(&argc, &argv);
  int w = ctx.world, me = ctx.rank;
  std::vector<int> world, reversed, evens, odds;
  for (int r = 0; r < w; ++r) {
    world.push_back(r);
    reversed.insert(reversed.begin(), r);
    (r % 2 == 0 ? evens : odds).push_back(r);
  }
  // First, a transfer between ranks 0 and 1 only, the others not taking part: send_recv must not need them.
  if (me < 2) check_send_recv({0, 1}, me);
  std::vector<std::vector<int>> groups = {world, reversed, evens, odds};
  if (w >= 4) groups.push_back({3, 1});  // a strict subset in non-increasing order
  rt::create_groups(groups);
  rt::create_groups({evens, {0}});  // evens again (skipped on every rank), then a group of one
  if (me == 0 && rt::group({0}).size() != 1) rt::fail("group {0} does not have one member");
  for (const auto &g : groups) {
    bool member = false;
    for (int r : g) member = member || r == me;
    if (member) {
      check_group(g, me);
      check_send_recv(g, me);
    }
  }
  check_long_reduce_scatter(reversed);
  rt::barrier();
  if (me == 0) std::printf("runtime collectives OK on %d ranks (%zu groups)\n", w, groups.size());
  rt::finalize();
  return 0;
}

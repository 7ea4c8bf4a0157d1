#pragma once
// The backend's clock for profiling (common/profile.cpp; not part of the API): cpu/profile_clock.cpp reads the wall
// clock at each mark, cuda/profile_clock.cu records an event on the compute stream.
namespace cleave::rt::host {

/** Makes room for `slots` marks (called once, before any mark). */
void clock_reserve(int slots);
/** Marks `slot` now (cpu) or at this point of the compute stream (cuda). */
void clock_mark(int slot);
/** Waits until every mark made so far has happened (cuda: the device is idle). */
void clock_sync();
/** Seconds from mark `from` to mark `to` (both made, then clock_sync()). */
double clock_seconds(int from, int to);

}  // namespace cleave::rt::host

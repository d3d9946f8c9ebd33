// Virtual time for the whole project.
//
// Contract: time is an integer count of picoseconds (Ps). Only fabric/ creates
// durations from physical quantities; everything above fabric receives times
// (now(), completion stamps) and declares costs by name (see sim/profile.h).
#pragma once

#include <cstdint>

namespace dmb {

using Ps = int64_t;  // picoseconds of virtual time

inline constexpr Ps kPsPerNs = 1000;
inline constexpr Ps kPsPerUs = 1000 * kPsPerNs;
inline constexpr Ps kPsPerMs = 1000 * kPsPerUs;
inline constexpr Ps kPsPerS = 1000 * kPsPerMs;

inline constexpr double PsToUs(Ps t) { return static_cast<double>(t) / kPsPerUs; }
inline constexpr double PsToNs(Ps t) { return static_cast<double>(t) / kPsPerNs; }
inline constexpr double PsToS(Ps t) { return static_cast<double>(t) / kPsPerS; }
inline constexpr Ps UsToPs(double us) { return static_cast<Ps>(us * kPsPerUs + 0.5); }
inline constexpr Ps NsToPs(double ns) { return static_cast<Ps>(ns * kPsPerNs + 0.5); }

}  // namespace dmb

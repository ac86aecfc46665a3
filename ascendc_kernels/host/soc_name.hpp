// Which kernel build a device runs: maps the runtime SoC name
// (aclrtGetSocName(), e.g. "Ascend910B3") to the family the device code is
// compiled for.  Plain C++; tested in tests/test_schedule.cpp.
#ifndef SGEMM_CUBE_HOST_SOC_NAME_HPP
#define SGEMM_CUBE_HOST_SOC_NAME_HPP

#include <cstring>

namespace sgemm_cube {
namespace host {

/// "910b" for Atlas A2/A3 parts (Ascend910B1..B4, Ascend910_93xx: dav-c220),
/// "910a" for the first Ascend 910 generation (Ascend910A, 910ProA, 910B,
/// 910ProB, 910PremiumA: dav-c100 - note that plain "Ascend910B" is a bin of
/// that generation), "" for anything else.
inline const char* soc_family(const char* name)
{
    if (name == nullptr || std::strncmp(name, "Ascend910", 9) != 0) {
        return "";
    }
    const char* rest = name + 9;
    if ((rest[0] == 'B' && rest[1] >= '1' && rest[1] <= '9') || std::strncmp(rest, "_93", 3) == 0) {
        return "910b";
    }
    static const char* const kFirstGen[] = {"A", "ProA", "B", "ProB", "PremiumA"};
    for (const char* suffix : kFirstGen) {
        if (std::strcmp(rest, suffix) == 0) {
            return "910a";
        }
    }
    return "";
}

}  // namespace host
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_HOST_SOC_NAME_HPP

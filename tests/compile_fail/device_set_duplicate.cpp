// A DeviceSet that lists a device twice must not compile; the control lists two devices.
#include <et/et.hpp>

int main() {
#ifdef ET_FAIL
  et::DeviceSet<et::Cpu, et::Cpu> set;
#else
  et::DeviceSet<et::Cpu, et::Pinned> set;
#endif
  return int(set.size()) - 2;
}

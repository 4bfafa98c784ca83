// libFuzzer target for what a capture directory holds: a trace description
// (trace-1.json) with its events (trace-1.twt), read by read_capture_dir; the
// same bytes as a pcap file, read with the wire index built over it; and the
// first part as a profiler's Chrome trace, imported. None of them crashes,
// hangs or reads outside its input, however damaged.
#include <cstdint>
#include <exception>

#include "fuzz_files.hpp"
#include "tensorwire/capture/chrome_trace.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/core/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [description, events] = tw::fuzz::two_parts(data, size);
  const std::string& dir = tw::fuzz::scratch_dir();
  tw::fuzz::write_file(dir + "/trace-1.json", description);
  tw::fuzz::write_file(dir + "/trace-1.twt", events);
  std::vector<tw::ProcessTrace> traces;
  try {
    traces = tw::read_capture_dir(dir);
  } catch (const std::runtime_error&) {
  }
  try {
    tw::fuzz::write_file(dir + "/wire.pcap", events);
    tw::wire::PcapRead r = tw::wire::read_pcap(dir + "/wire.pcap");
    tw::wire::WireIndex w;
    w.add(std::move(r.segments));
    w.finish();
  } catch (const std::runtime_error&) {
  }
  try {
    tw::fuzz::write_file(dir + "/profiler.json", description);
    (void)tw::import_chrome_trace(dir + "/profiler.json", {}, traces, 0, 0);
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}

// What `tensorwire trace show` reports on a capture directory: its processes,
// connections, messages and their timing, as tables for people and as JSON.
// Reading is apart from reporting, so the report is tested on captures built in
// memory. Any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorwire/capture/chrome_trace.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

// A capture read back and cut into messages.
struct CaptureReading {
  std::vector<ProcessTrace> traces;
  WireCapture wire;
  CaptureAnalysis analysis;
  Nanos gap = 100 * kMicro;  // send calls closer than this belong to one message
};

// Reads DIR (traces and wire data) and cuts messages at `gap`. Throws
// std::runtime_error naming DIR when it holds no trace.
CaptureReading read_capture(const std::string& dir, Nanos gap);

// The report as JSON (`trace show --json`): processes, wire, connections (with
// timing distributions), messages and annotated spans, as an object indented by
// 2, written to `out` as it is made (in pieces of about a megabyte).
void write_trace_report_json(const CaptureReading& c, const std::function<void(std::string_view)>& out);

// The report as text: the tables `trace show` prints, with the job's annotations
// and the imported profiler ops (`ops`: read_imported_ops of the directory).
std::string trace_report_text(const CaptureReading& c, const std::vector<ImportedOp>& ops);

}  // namespace tw

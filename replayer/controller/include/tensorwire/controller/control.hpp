// Kept so that code not yet moved over compiles: what this header held now
// lives where it belongs. New code includes those headers directly:
//   tensorwire/protocol/control_messages.hpp  the messages, kControlVersion, kAgentPath
//   tensorwire/protocol/run_settings.hpp      RunSettings
//   tensorwire/util/token.hpp                 same_token, random_token
//   tensorwire/util/realtime.hpp              realtime_ns
//   tensorwire/util/host_port.hpp             split_host_port
#pragma once

#include "tensorwire/protocol/control_messages.hpp"
#include "tensorwire/protocol/run_settings.hpp"
#include "tensorwire/util/host_port.hpp"
#include "tensorwire/util/realtime.hpp"
#include "tensorwire/util/token.hpp"

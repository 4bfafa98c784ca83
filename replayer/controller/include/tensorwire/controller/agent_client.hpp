// Kept so that the CLI compiles unchanged: the agent's side of the control link
// now lives with the agent.
#pragma once

#include "tensorwire/agent/control_link.hpp"

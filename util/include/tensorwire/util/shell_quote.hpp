// Quoting a word for a POSIX shell: a command the ssh launcher runs remotely, or
// one printed for a user to paste.
#pragma once

#include <string>

namespace tw {

// 'word', with every ' inside written as '\''.
std::string shell_quote(const std::string& word);

}  // namespace tw

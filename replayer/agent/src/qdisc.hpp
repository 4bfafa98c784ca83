// Whether a socket's packets can wait in a queueing discipline on their way out:
// the only place where TX_SCHED timestamps (entering the qdisc) say something
// that TX_SOFTWARE ones (handed to the device) do not. Loopback and veth
// devices have none (noqueue); a shaped testbed link or a physical NIC has one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace tw {

// The kind of the root queueing discipline of interface `ifindex` in the
// messages of an RTM_GETQDISC dump ("noqueue", "tbf", "fq_codel", ...);
// nullopt when the dump has none for it. Pure: parses the bytes only.
std::optional<std::string> root_qdisc_kind(const void* dump, std::size_t len, int ifindex);

// For a connected socket: whether the interface holding its local address has a
// root queueing discipline other than noqueue. False when it cannot tell (no such
// interface, netlink refused): TX_SCHED is then not asked for.
bool egress_can_queue(int fd);

}  // namespace tw

#include "actors/scale_out/remote_protocol.hpp"

namespace pagoda::actors {

void add_remote_message_types(caf::actor_system_config& config) {
  config.add_message_type<NodeHello>("pagoda.NodeHello");
  config.add_message_type<NodeReport>("pagoda.NodeReport");
  config.add_message_type<WireSubmit>("pagoda.WireSubmit");
  config.add_message_type<WireEvents>("pagoda.WireEvents");
  config.add_message_type<KvSnapshot>("pagoda.KvSnapshot");
}

}  // namespace pagoda::actors

#include "engine/wallets.h"

namespace gpuhub::engine {

Status LoadWallets(store::Store&, WalletsState&) { return Status::Ok(); }

}  // namespace gpuhub::engine

// Wallets: the ledger inside the engine, top-up invoices and FX rates. (Filled in once the ledger
// component lands.)
#pragma once

#include "engine/state.h"

namespace gpuhub::engine {

struct WalletsState {};

}  // namespace gpuhub::engine

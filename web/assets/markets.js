// Live market data (GET /v1/markets): the "from $X/h" figure every page shows. A page still works
// when the exchange cannot be reached: it then shows the catalog only.
import { api } from './api.js';

let marketsPromise = null;

// -> Map of GPU model name -> {gpu, best_ask_usd_per_gpu_hour, best_bid_usd_per_gpu_hour,
// gpus_on_offer, gpus_bid, asks, bids, last_trade, listed}.
export function loadMarkets({ refresh = false } = {}) {
  if (!marketsPromise || refresh) {
    marketsPromise = api('GET', '/v1/markets')
      .then((data) => new Map((data.markets || []).map((m) => [m.gpu, m])))
      .catch(() => new Map());
  }
  return marketsPromise;
}

export function bestAsk(market) {
  return market ? market.best_ask_usd_per_gpu_hour : null;
}

export function bestBid(market) {
  return market ? market.best_bid_usd_per_gpu_hour : null;
}

export function gpusOnOffer(market) {
  return market ? market.gpus_on_offer : null;
}

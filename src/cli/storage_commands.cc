// `gpuhub volumes ...`, `gpuhub snapshots ...` and `gpuhub admin storage-hosts ...`: storage
// against a running server (--server URL or $GPUHUB_SERVER; --token or $GPUHUB_TOKEN). Every figure
// comes from the server's answer; --json prints that answer as is.
//
//   gpuhub volumes create --region R --size-tb N [--name NAME] [--currency C] [--idempotency-key K]
//   gpuhub volumes list [--limit N] | show ID | resize ID --size-tb N | pay ID
//   gpuhub volumes attach ID --rental R | detach ID --rental R | delete ID --yes
//   gpuhub snapshots create (--volume ID | --rental ID) [--name NAME] [--currency C]
//   gpuhub snapshots list [--limit N] | show ID | pay ID | delete ID --yes
//   gpuhub snapshots restore ID [--region R] [--size-tb N] [--name NAME] [--currency C]
//   gpuhub admin storage-hosts add --region R --capacity-tb N [--hostname H] | list [--region R]
//   gpuhub admin storage-hosts drain ID | undrain ID
//
// Exit codes: 0 ok; 2 bad input, including any 4xx answer of the server (one line on stderr naming
// the field); 1 when the server cannot be reached or fails (5xx).
#include <CLI/CLI.hpp>
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/command_registry.h"
#include "cli/rental_commands.h"
#include "cli/server_verbs.h"

namespace gpuhub::cli {
namespace {

// The state, what is paid and what happens when, as the account page says it.
void PrintBill(const json& item) {
  const json& b = item["bill"];
  std::cout << "  bill      " << Money(b["price"]["next_day"]) << " USD the next day ("
            << Money(b["price"]["per_month"]) << " per 30 days), from the " << Str(b, "wallet")
            << " wallet; paid through " << Str(b, "paid_through") << "\n";
  if (b["unpaid"].is_object()) {
    const json& u = b["unpaid"];
    std::cout << "  UNPAID    since " << Str(u, "since") << ": " << Money(u["due"])
              << " USD due (" << Str(u, "pay") << ")\n";
  }
  for (const auto& step : item["schedule"]) {
    std::cout << "  at " << Str(step, "at") << ": " << Str(step, "what") << "\n";
  }
  if (!b["deleted_at"].is_null()) {
    std::cout << "  deleted   " << Str(b, "deleted_at") << " (" << Str(b, "delete_reason") << ")\n";
  }
}

void PrintHistory(const json& item) {
  if (!item.contains("history")) return;
  std::cout << "  history\n";
  for (const auto& e : item["history"]) {
    std::cout << "    " << Str(e, "at") << "  " << std::left << std::setw(10) << Str(e, "event")
              << std::right << Str(e, "detail") << "\n";
  }
}

void PrintVolume(const json& v) {
  std::cout << "volume " << Str(v, "id") << (v["name"].is_null() ? "" : " \"" + Str(v, "name") + "\"")
            << ": " << Str(v, "size_tb") << " TB in " << Str(v, "region") << ", " << Str(v, "state")
            << " (" << Str(v, "access") << "), " << Str(v, "replicas") << " replicas on hosts";
  for (const auto& h : v["hosts"]) std::cout << " " << Str(h, "id");
  std::cout << "\n";
  std::cout << "  attached  ";
  if (v["attachments"].empty()) std::cout << "to no instance";
  for (const auto& a : v["attachments"]) {
    std::cout << "rental " << Str(a, "rental_id") << " (" << Str(a, "gpu") << ") ";
  }
  std::cout << "\n";
  if (!v["warning"].is_null()) std::cout << "  WARNING   " << Str(v, "warning") << "\n";
  if (!v["restored_from"].is_null()) {
    std::cout << "  restored from snapshot " << Str(v, "restored_from") << "\n";
  }
  PrintBill(v);
  PrintHistory(v);
}

void PrintSnapshot(const json& s) {
  std::cout << "snapshot " << Str(s, "id") << (s["name"].is_null() ? "" : " \"" + Str(s, "name") + "\"")
            << ": " << Str(s, "size_tb") << " TB in " << Str(s, "region") << ", copy of "
            << (s["source"]["kind"] == "volume" ? "volume " + Str(s["source"], "volume_id")
                                                : "the local NVMe of rental " +
                                                      Str(s["source"], "rental_id"))
            << ", " << Str(s, "state") << (s["restorable"] == true ? " (restorable)" : "") << "\n";
  PrintBill(s);
  PrintHistory(s);
}

void PrintVolumeList(const json& body) {
  if (body["volumes"].empty()) {
    std::cout << "no volumes\n";
    return;
  }
  std::cout << "  id  name              region  TB   state      access      attached    paid through\n";
  for (const auto& v : body["volumes"]) {
    std::string attached;
    for (const auto& a : v["attachments"]) {
      attached += (attached.empty() ? "" : ",") + Str(a, "rental_id");
    }
    std::cout << std::setw(4) << v["id"].get<long long>() << "  " << std::left << std::setw(17)
              << Str(v, "name") << " " << std::setw(7) << Str(v, "region") << " " << std::right
              << std::setw(3) << v["size_tb"].get<long long>() << "  " << std::left
              << std::setw(10) << Str(v, "state") << " " << std::setw(11) << Str(v, "access")
              << " " << std::setw(11) << (attached.empty() ? "-" : attached) << " "
              << Str(v["bill"], "paid_through") << std::right << "\n";
  }
  std::cout << "storage costs " << Money(body["daily_cost"]["next_day"])
            << " USD the next day in all (" << Str(body["daily_cost"], "tb") << " TB)\n";
}

void PrintSnapshotList(const json& body) {
  if (body["snapshots"].empty()) {
    std::cout << "no snapshots\n";
    return;
  }
  std::cout << "  id  name              region  TB   state      source        paid through\n";
  for (const auto& s : body["snapshots"]) {
    std::string source = s["source"]["kind"] == "volume" ? "volume " + Str(s["source"], "volume_id")
                                                         : "rental " + Str(s["source"], "rental_id");
    std::cout << std::setw(4) << s["id"].get<long long>() << "  " << std::left << std::setw(17)
              << Str(s, "name") << " " << std::setw(7) << Str(s, "region") << " " << std::right
              << std::setw(3) << s["size_tb"].get<long long>() << "  " << std::left
              << std::setw(10) << Str(s, "state") << " " << std::setw(13) << source << " "
              << Str(s["bill"], "paid_through") << std::right << "\n";
  }
}

struct Flags {
  Connection c;
  long long id = 0, size_tb = 0, rental = 0, volume = 0, capacity_tb = 0;
  int limit = 0;
  std::string region, name, currency, hostname, idempotency_key;
  bool yes = false;
};

// Runs `call` and prints its answer with `print` (or as JSON with --json).
void Run(const Flags& f, ServerCall call, void (*print)(const json&)) {
  CallAndPrint(f.c, std::move(call), true, print);
}

std::string Id(const char* base, long long id, const char* suffix = "") {
  return std::string(base) + std::to_string(id) + suffix;
}

void AddVolumeCommands(CLI::App& app) {
  CLI::App* volumes = app.add_subcommand(
      "volumes", "network volumes on a running server: $14 per TB-month, 3 copies in a region");
  volumes->require_subcommand(1);

  auto create = std::make_shared<Flags>();
  CLI::App* c = volumes->add_subcommand("create", "a volume in a region; pays its first day");
  c->add_option("--region", create->region, "DFW-1, IAD-1, PDX-1")->required();
  c->add_option("--size-tb", create->size_tb, "whole TB, 1..100")->required();
  c->add_option("--name", create->name, "letters, digits, '-', '_', '.'");
  c->add_option("--currency", create->currency, "the wallet that pays: USD, EUR or GBP");
  c->add_option("--idempotency-key", create->idempotency_key,
                "retry-safe key: the same key never creates twice");
  AddConnection(c, create->c, true);
  c->callback([create] {
    json body = {{"region", create->region}, {"size_tb", create->size_tb}};
    if (!create->name.empty()) body["name"] = create->name;
    if (!create->currency.empty()) body["currency"] = create->currency;
    Run(*create, {"POST", "/v1/volumes", body.dump(), "", create->idempotency_key}, PrintVolume);
  });

  auto list = std::make_shared<Flags>();
  CLI::App* l = volumes->add_subcommand("list", "your volumes, newest first, and the daily cost");
  l->add_option("--limit", list->limit, "at most this many (1..500)");
  AddConnection(l, list->c, true);
  l->callback([list] {
    Run(*list,
        {"GET", "/v1/volumes" + (list->limit ? "?limit=" + std::to_string(list->limit) : ""), "",
         "", ""},
        PrintVolumeList);
  });

  auto show = std::make_shared<Flags>();
  CLI::App* s = volumes->add_subcommand("show", "one volume: bill, what happens when, history");
  s->add_option("id", show->id, "volume id")->required();
  AddConnection(s, show->c, true);
  s->callback([show] { Run(*show, {"GET", Id("/v1/volumes/", show->id), "", "", ""}, PrintVolume); });

  auto resize = std::make_shared<Flags>();
  CLI::App* rs = volumes->add_subcommand(
      "resize", "grow a volume (never shrinks); pays the added TB for the rest of the paid day");
  rs->add_option("id", resize->id, "volume id")->required();
  rs->add_option("--size-tb", resize->size_tb, "the new size, whole TB")->required();
  AddConnection(rs, resize->c, true);
  rs->callback([resize] {
    Run(*resize,
        {"POST", Id("/v1/volumes/", resize->id, "/resize"),
         json({{"size_tb", resize->size_tb}}).dump(), "", ""},
        PrintVolume);
  });

  for (bool attach : {true, false}) {
    auto f = std::make_shared<Flags>();
    CLI::App* a = volumes->add_subcommand(
        attach ? "attach" : "detach",
        attach ? "attach to a rental of yours in the volume's region (several: a shared "
                 "filesystem, concurrent writers must coordinate)"
               : "detach from a rental");
    a->add_option("id", f->id, "volume id")->required();
    a->add_option("--rental", f->rental, "rental id")->required();
    AddConnection(a, f->c, true);
    a->callback([f, attach] {
      Run(*f,
          {"POST", Id("/v1/volumes/", f->id, attach ? "/attach" : "/detach"),
           json({{"rental_id", f->rental}}).dump(), "", ""},
          PrintVolume);
    });
  }

  auto pay = std::make_shared<Flags>();
  CLI::App* p = volumes->add_subcommand(
      "pay", "an unpaid volume: pay every day missed, active again (before its deletion)");
  p->add_option("id", pay->id, "volume id")->required();
  AddConnection(p, pay->c, true);
  p->callback([pay] { Run(*pay, {"POST", Id("/v1/volumes/", pay->id, "/pay"), "", "", ""}, PrintVolume); });

  auto del = std::make_shared<Flags>();
  CLI::App* d = volumes->add_subcommand("delete", "delete a detached volume and its data, now");
  d->add_option("id", del->id, "volume id")->required();
  d->add_flag("--yes", del->yes, "confirm: the data is destroyed; the day paid is not refunded");
  AddConnection(d, del->c, true);
  d->callback([del] {
    if (!del->yes) {
      return FailBadInput("deleting volume " + std::to_string(del->id) +
                          " destroys its data now and the day paid is not refunded; add --yes to "
                          "go ahead");
    }
    Run(*del, {"DELETE", Id("/v1/volumes/", del->id), "", "", ""}, PrintVolume);
  });
}

void AddSnapshotCommands(CLI::App& app) {
  CLI::App* snapshots = app.add_subcommand(
      "snapshots", "snapshots on a running server: $6 per TB-month, restorable in their region");
  snapshots->require_subcommand(1);

  auto create = std::make_shared<Flags>();
  CLI::App* c = snapshots->add_subcommand(
      "create", "snapshot a volume, or a running rental's local NVMe; pays its first day");
  c->add_option("--volume", create->volume, "a network volume of yours");
  c->add_option("--rental", create->rental, "a running rental of yours (its local NVMe)");
  c->add_option("--name", create->name, "letters, digits, '-', '_', '.'");
  c->add_option("--currency", create->currency, "the wallet that pays: USD, EUR or GBP");
  AddConnection(c, create->c, true);
  c->callback([create] {
    if ((create->volume != 0) == (create->rental != 0)) {
      return FailBadInput("give exactly one of --volume ID or --rental ID");
    }
    json body = create->volume != 0 ? json({{"volume_id", create->volume}})
                                    : json({{"rental_id", create->rental}});
    if (!create->name.empty()) body["name"] = create->name;
    if (!create->currency.empty()) body["currency"] = create->currency;
    Run(*create, {"POST", "/v1/snapshots", body.dump(), "", ""}, PrintSnapshot);
  });

  auto list = std::make_shared<Flags>();
  CLI::App* l = snapshots->add_subcommand("list", "your snapshots, newest first");
  l->add_option("--limit", list->limit, "at most this many (1..500)");
  AddConnection(l, list->c, true);
  l->callback([list] {
    Run(*list,
        {"GET", "/v1/snapshots" + (list->limit ? "?limit=" + std::to_string(list->limit) : ""), "",
         "", ""},
        PrintSnapshotList);
  });

  auto show = std::make_shared<Flags>();
  CLI::App* s = snapshots->add_subcommand("show", "one snapshot: bill, what happens when, history");
  s->add_option("id", show->id, "snapshot id")->required();
  AddConnection(s, show->c, true);
  s->callback(
      [show] { Run(*show, {"GET", Id("/v1/snapshots/", show->id), "", "", ""}, PrintSnapshot); });

  auto restore = std::make_shared<Flags>();
  CLI::App* r = snapshots->add_subcommand(
      "restore", "a new volume from a snapshot, in the snapshot's region; pays its first day");
  r->add_option("id", restore->id, "snapshot id")->required();
  r->add_option("--region", restore->region, "must be the snapshot's region (default)");
  r->add_option("--size-tb", restore->size_tb, "whole TB, at least the snapshot's (default)");
  r->add_option("--name", restore->name, "the new volume's name");
  r->add_option("--currency", restore->currency, "the wallet that pays: USD, EUR or GBP");
  AddConnection(r, restore->c, true);
  r->callback([restore] {
    json body = json::object();
    if (!restore->region.empty()) body["region"] = restore->region;
    if (restore->size_tb != 0) body["size_tb"] = restore->size_tb;
    if (!restore->name.empty()) body["name"] = restore->name;
    if (!restore->currency.empty()) body["currency"] = restore->currency;
    Run(*restore, {"POST", Id("/v1/snapshots/", restore->id, "/restore"), body.dump(), "", ""},
        PrintVolume);
  });

  auto pay = std::make_shared<Flags>();
  CLI::App* p = snapshots->add_subcommand("pay", "an unpaid snapshot: pay every day missed");
  p->add_option("id", pay->id, "snapshot id")->required();
  AddConnection(p, pay->c, true);
  p->callback(
      [pay] { Run(*pay, {"POST", Id("/v1/snapshots/", pay->id, "/pay"), "", "", ""}, PrintSnapshot); });

  auto del = std::make_shared<Flags>();
  CLI::App* d = snapshots->add_subcommand("delete", "delete a snapshot now");
  d->add_option("id", del->id, "snapshot id")->required();
  d->add_flag("--yes", del->yes, "confirm: it cannot be restored afterwards");
  AddConnection(d, del->c, true);
  d->callback([del] {
    if (!del->yes) {
      return FailBadInput("deleting snapshot " + std::to_string(del->id) +
                          " is final; add --yes to go ahead");
    }
    Run(*del, {"DELETE", Id("/v1/snapshots/", del->id), "", "", ""}, PrintSnapshot);
  });
}

void PrintHosts(const json& list) {
  std::cout << "  id  region  capacity TB  used TB  state     hostname\n";
  for (const auto& h : list) {
    std::cout << std::setw(4) << h["id"].get<long long>() << "  " << std::left << std::setw(7)
              << Str(h, "region") << std::right << " " << std::setw(11)
              << h["capacity_tb"].get<long long>() << "  " << std::setw(7)
              << h["used_tb"].get<long long>() << "  " << std::left << std::setw(9)
              << Str(h, "state") << " " << Str(h, "hostname") << std::right << "\n";
  }
}

}  // namespace

void AddAdminStorageHostCommands(CLI::App* admin) {
  CLI::App* hosts = admin->add_subcommand(
      "storage-hosts",
      "the storage hosts of each region (volumes keep 3 copies), on a running server (--server, "
      "--token of an admin)");
  hosts->require_subcommand(1);

  auto add = std::make_shared<Flags>();
  CLI::App* a = hosts->add_subcommand("add", "add a storage host (it takes replicas at once)");
  a->add_option("--region", add->region, "region code")->required();
  a->add_option("--capacity-tb", add->capacity_tb, "whole TB it holds")->required();
  a->add_option("--hostname", add->hostname, "for operators");
  AddConnection(a, add->c, true);
  a->callback([add] {
    json body = {{"region", add->region}, {"capacity_tb", add->capacity_tb}};
    if (!add->hostname.empty()) body["hostname"] = add->hostname;
    Run(*add, {"POST", "/v1/admin/storage-hosts", body.dump(), "", ""},
        [](const json& h) { PrintHosts(json::array({h})); });
  });

  auto list = std::make_shared<Flags>();
  CLI::App* l = hosts->add_subcommand("list", "every storage host, by id");
  l->add_option("--region", list->region, "only this region");
  AddConnection(l, list->c, true);
  l->callback([list] {
    Run(*list,
        {"GET", "/v1/admin/storage-hosts" + (list->region.empty() ? "" : "?region=" + list->region),
         "", "", ""},
        [](const json& body) { PrintHosts(body["hosts"]); });
  });

  for (bool drain : {true, false}) {
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = hosts->add_subcommand(drain ? "drain" : "undrain",
                                          drain ? "take no new replicas; the present ones stay"
                                                : "take new replicas again");
    cmd->add_option("id", f->id, "storage host id")->required();
    AddConnection(cmd, f->c, true);
    cmd->callback([f, drain] {
      Run(*f,
          {"POST", Id("/v1/admin/storage-hosts/", f->id, drain ? "/drain" : "/undrain"), "", "",
           ""},
          [](const json& h) { PrintHosts(json::array({h})); });
    });
  }
}

namespace {

void AddStorageCommands(CLI::App& app) {
  AddVolumeCommands(app);
  AddSnapshotCommands(app);
}

const bool kRegistered = RegisterCommands(&AddStorageCommands);

}  // namespace
}  // namespace gpuhub::cli

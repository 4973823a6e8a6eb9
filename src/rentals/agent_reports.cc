// Fleet: what a node's agent reports: an instance's state and connection, and a finished wipe.
#include "rentals/fleet.h"

#include <string>
#include <utility>
#include <vector>

namespace gpuhub::rentals {

namespace {

Status ValidateConnection(const std::vector<std::pair<std::string, std::string>>& fields) {
  if (fields.size() > kMaxConnectionFields) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxConnectionFields) +
                                   " connection fields")
        .WithField("connection");
  }
  for (const auto& [key, value] : fields) {
    bool ok = !key.empty() && key.size() <= kMaxConnectionKeyBytes;
    for (char c : key) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok) {
      return Status::InvalidArgument("connection keys are 1.." +
                                     std::to_string(kMaxConnectionKeyBytes) +
                                     " characters of [a-z0-9_] such as \"ssh_host\"")
          .WithField("connection");
    }
    ok = value.size() <= kMaxConnectionValueBytes;
    for (unsigned char c : value) ok = ok && c >= 0x20 && c != 0x7f;
    if (!ok) {
      return Status::InvalidArgument("connection value of '" + key + "' must be at most " +
                                     std::to_string(kMaxConnectionValueBytes) +
                                     " printable characters")
          .WithField("connection");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Rental> Fleet::ReportInstance(RentalId id, const InstanceReport& report,
                                     ledger::Ledger& ledger, TimestampMicros now,
                                     Changes* changes) {
  now = Now(now);
  if (FindRental(id) == nullptr) return Status::NotFound("no rental " + std::to_string(id));
  GPUHUB_RETURN_IF_ERROR(ValidateConnection(report.connection));
  if (report.error.size() > kMaxInstanceErrorBytes) {
    return Status::InvalidArgument("error must be at most " +
                                   std::to_string(kMaxInstanceErrorBytes) + " bytes")
        .WithField("error");
  }
  RentalSlot& slot = Slot(id);
  Rental& r = slot.rental;
  if (report.state == InstanceState::kRunning) {
    if (r.state == RentalState::kProvisioning) {
      r.instance.connection = report.connection;
      Activate(slot, now, changes);
    } else if (r.state == RentalState::kActive) {
      r.instance.connection = report.connection;  // the agent moved or restarted it
      Touch(slot, now, changes);
    } else {
      return Status::FailedPrecondition("rental " + std::to_string(id) + " is " +
                                        std::string(RentalStateName(r.state)) +
                                        ": its instance must not run");
    }
  } else if (report.state == InstanceState::kFailed) {
    if (r.state != RentalState::kProvisioning) {
      return Status::FailedPrecondition("only an instance being provisioned can fail; rental " +
                                        std::to_string(id) + " is " +
                                        std::string(RentalStateName(r.state)));
    }
    r.instance.state = InstanceState::kFailed;
    r.instance.error = report.error;
    Record(slot, EventKind::kInstanceFailed, now, report.error.empty() ? "failed" : report.error,
           changes);
    ReleaseNow(slot, ReleaseReason::kProvisioningFailed, ledger, now, changes);
  } else {
    return Status::InvalidArgument("an agent reports running or failed").WithField("state");
  }
  Reschedule(slot);
  return slot.rental;
}

Result<Rental> Fleet::RecordWipe(RentalId id, TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (FindRental(id) == nullptr) return Status::NotFound("no rental " + std::to_string(id));
  RentalSlot& slot = Slot(id);
  if (slot.rental.state != RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(id) +
                                      " is not released: its disk is in use");
  }
  if (slot.rental.instance.wiped_at != 0) return slot.rental;
  slot.rental.instance.wiped_at = now;
  Record(slot, EventKind::kWiped, now, "local NVMe wiped", changes);
  Touch(slot, now, changes);
  Reschedule(slot);
  return slot.rental;
}

}  // namespace gpuhub::rentals

// The order pages (market bid, rent) warn before buying when the account has no SSH key: the
// machine lets only the account's keys log in, so a machine bought without one cannot be reached.
// The warning links to the account's SSH keys.
import { api } from './api.js';
import { h, replace } from './dom.js';

// Fills `slot` with the warning when the signed-in account has no key, empties it otherwise.
// Resolves to the number of keys (null when they could not be read: no warning then).
export async function sshKeyWarning(slot) {
  if (!slot) return null;
  try {
    const data = await api('GET', '/v1/ssh-keys');
    const n = data.ssh_keys.length;
    if (n > 0) {
      replace(slot);
      slot.hidden = true;
    } else {
      replace(slot, h('strong', null, 'Your account has no SSH key. '),
        'The machine lets only your account\'s keys log in, so you could not connect to it. ',
        h('a', { href: '/account/#ssh-keys', 'data-testid': 'add-ssh-key' }, 'Add an SSH key'), ' first (it takes a minute), then come back.');
      slot.hidden = false;
    }
    return n;
  } catch {
    replace(slot);
    slot.hidden = true;
    return null;
  }
}

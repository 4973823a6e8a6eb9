// Two-factor sign-in of the account (GET/POST /v1/accounts/me/totp, .../confirm, .../disable):
// set up shows the otpauth:// URI as a QR code to scan (qr.js), and as text with the secret to
// paste or type, a code turns it on and the recovery codes are shown once; a code or a recovery code
// turns it off. The server checks every code and names the field at fault.
import { api } from './api.js';
import { h, $, replace, showFormError, clearFormErrors, setBusy, errorBox, copyableCommand } from './dom.js';
import { timestamp } from './format.js';
import { qrSvg } from './qr.js';

const form = $('#totp-form');
let mode = 'confirm';  // what the code form does: 'confirm' (turn on) or 'disable'

export async function loadTwoFactor() {
  const slot = $('#totp-status');
  try {
    const s = await api('GET', '/v1/accounts/me/totp');
    mode = s.enabled ? 'disable' : 'confirm';
    $('#totp-start').hidden = s.enabled;
    form.hidden = !s.enabled && !s.pending;
    $('#totp-submit').textContent = s.enabled ? 'Turn off' : 'Turn on';
    replace(
      slot,
      h('p', {}, s.enabled
        ? `On since ${timestamp(s.enabled_at)}; ${s.recovery_codes_left} recovery codes left. Enter a code or a recovery code to turn it off.`
        : s.pending ? 'Set up started: enter a code from your app to turn it on.' : 'Off: your password alone signs you in.')
    );
  } catch (e) {
    replace(slot, errorBox('Two-factor sign-in could not be loaded: ' + e.message));
  }
}

async function onStart(e) {
  const button = e.currentTarget;
  setBusy(button, true);
  try {
    const t = await api('POST', '/v1/accounts/me/totp', {});
    replace(
      $('#totp-enrol'),
      h('div', { class: 'alert alert-ok', role: 'status' },
        h('p', {}, 'Scan this with your authenticator app (or paste the link or the secret), then enter its code below.'),
        h('div', { id: 'totp-qr', class: 'totp-qr', role: 'img', 'aria-label': 'QR code of the otpauth link' }, qrSvg(t.otpauth_uri) || ''),
        copyableCommand(t.otpauth_uri, 'the otpauth link'),
        copyableCommand(t.secret, 'the secret'))
    );
    await loadTwoFactor();
  } catch (err) {
    replace($('#totp-enrol'), errorBox(err.message));
  } finally {
    setBusy(button, false);
  }
}

async function onSubmit(e) {
  e.preventDefault();
  clearFormErrors(form);
  const code = form.elements.totp_code.value.trim();
  const button = $('#totp-submit');
  setBusy(button, true);
  try {
    const answer = await api('POST', `/v1/accounts/me/totp/${mode}`, { totp_code: code });
    form.reset();
    replace(
      $('#totp-enrol'),
      answer.recovery_codes
        ? h('div', { class: 'alert alert-ok', role: 'status' },
          h('p', {}, 'Two-factor sign-in is on. Keep these recovery codes offline; each works once, and they are not shown again.'),
          h('ul', { class: 'recovery-codes' }, answer.recovery_codes.map((c) => h('li', {}, h('code', {}, c)))))
        : h('div', { class: 'alert alert-ok', role: 'status' }, 'Two-factor sign-in is off.')
    );
    await loadTwoFactor();
  } catch (err) {
    showFormError(form, err);
  } finally {
    setBusy(button, false);
  }
}

export function initTwoFactor() {
  $('#totp-start').addEventListener('click', onStart);
  form.addEventListener('submit', onSubmit);
}

// The login form: user name, password and, once the server asks for it, the authenticator code.
import { useEffect, useRef, useState } from './hooks.js';
import { api, html } from './ui.js';

export function Login({ onLoggedIn }) {
  const [username, setUsername] = useState('admin');
  const [password, setPassword] = useState('');
  const [otp, setOtp] = useState('');
  const [otpNeeded, setOtpNeeded] = useState(false);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const otpInput = useRef(null);

  useEffect(() => {
    if (otpNeeded) otpInput.current?.focus();
  }, [otpNeeded]);

  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError('');
    const answer = await api('POST', '/auth/login', otpNeeded ? { username, password, otp } : { username, password });
    setBusy(false);
    if (answer.status === 200) return onLoggedIn(answer.body);
    if (answer.body.error_code === 'OTP_REQUIRED') {
      setOtpNeeded(true);
      return setError('Enter the 6-digit code of your authenticator app.');
    }
    setError(answer.body.message || `The login failed (${answer.status})`);
  };

  return html`<main class="login">
    <form onSubmit=${submit} aria-describedby=${error ? 'login-error' : undefined}>
      <h1>Plinth admin</h1>
      <label for="username">User name</label>
      <input id="username" name="username" autocomplete="username" required value=${username} onInput=${(event) => setUsername(event.target.value)} />
      <label for="password">Password</label>
      <input
        id="password"
        name="password"
        type="password"
        autocomplete="current-password"
        required
        value=${password}
        onInput=${(event) => setPassword(event.target.value)}
      />
      ${
        otpNeeded &&
        html`<label for="otp">Authenticator code</label>
          <input
            id="otp"
            name="otp"
            ref=${otpInput}
            inputmode="numeric"
            autocomplete="one-time-code"
            pattern="[0-9]{6}"
            maxlength="6"
            required
            value=${otp}
            onInput=${(event) => setOtp(event.target.value)}
          />`
      }
      <p id="login-error" class="error" role="alert">${error}</p>
      <button type="submit" disabled=${busy}>${busy ? 'Logging in…' : 'Log in'}</button>
    </form>
  </main>`;
}

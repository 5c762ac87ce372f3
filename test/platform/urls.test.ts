import { loadConfig } from '../../src/config';
import { authUrl, publicUrl } from '../../src/platform/urls';

describe('links', () => {
  const config = loadConfig({ PLINTH_PUBLIC_URL: 'https://api.example.com/plinth', AUTH_SERVER_URL: 'https://auth.example.com' });

  it('puts the path under PLINTH_PUBLIC_URL and encodes the query', () => {
    expect(publicUrl(config, '/newsletter/confirm', { token: 'a+b/c=', email: 'ada+news@example.com', unused: undefined })).toBe(
      'https://api.example.com/plinth/newsletter/confirm?token=a%2Bb%2Fc%3D&email=ada%2Bnews%40example.com',
    );
    expect(publicUrl(config, '/')).toBe('https://api.example.com/plinth/');
  });

  it('puts auth links under AUTH_SERVER_URL, the spec’s {auth_url}', () => {
    expect(authUrl(config, '/verify', { ticket: 'otp:123', type: 'signinPasswordless', redirectTo: 'https://app.example.com/?a=1&b=2' })).toBe(
      'https://auth.example.com/verify?ticket=otp%3A123&type=signinPasswordless&redirectTo=https%3A%2F%2Fapp.example.com%2F%3Fa%3D1%26b%3D2',
    );
    expect(authUrl(loadConfig({ PORT: '4000' }), '/verify')).toBe('http://localhost:4000/auth/verify');
  });

  it.each(['verify', '/verify?ticket=x', '/verify#x'])('refuses the path %j (a query goes in the query argument)', (path) => {
    expect(() => authUrl(config, path)).toThrow(/a link path starts with "\/" and has no query or fragment/);
  });
});

/**
 * An e-mail address as a mail header carries it: one `@`, no spaces, no characters that would
 * start a display name, a comment or a second address. Bare hosts (`noreply@localhost`) pass, so
 * development needs no domain; whether a recipient exists is the SMTP server's answer.
 */
export const MAIL_ADDRESS = /^[^\s@<>()",;:\\[\]]+@[^\s@<>()",;:\\[\]]+$/;

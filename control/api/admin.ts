// Route group: admin (filled in by its issue work).
import { routes } from './types.js';

export const adminRoutes = routes({});
